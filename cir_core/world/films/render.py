"""Keyframes of a shot: the world's drawing (backgrounds, props, figures) under a film's colour
grade and a camera, with every figure's body box.

`render_keyframe(k, size)` is deterministic in the `Keyframe` (film grade, the scene's setting
seed, the shot's state and seed, the keyframe's index) and `size`. Within a shot the three
keyframes differ only in what no text mentions: the camera (zoom 1.00–1.12 per shot, ±1.5 % per
keyframe; pan ±3 % per shot, ±1 % per keyframe), each figure's place in its slot (±3 % per
shot, ±1.2 % per keyframe), the props' jitter and the angle of raised arms. A scene's setting
keeps its details (the skyline, the trees) from shot to shot.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import cast

from PIL import Image, ImageDraw

from ..render import RGB, SLOT_X, draw_background, draw_figure, draw_object
from ..spec import identity_look
from .spec import EXTRA_COLOURS, Frame

FILM_RENDER_VERSION = 1  # bump when pixels change: it is part of every keyframe's fingerprint
EXTRA_RGB = {"beige": (215, 195, 160), "olive": (120, 125, 55), "maroon": (120, 30, 45),
             "slate": (85, 100, 115), "tan": (190, 150, 100), "plum": (110, 60, 95)}


def _lut(gain: tuple[float, float, float], lift: tuple[float, float, float]) -> list[int]:
    return [max(0, min(255, int(round(v * g + b)))) for g, b in zip(gain, lift) for v in range(256)]


# A film's colour grade: per-channel gain and lift (muted also blends toward grey). Mild, so an
# actor's body colour stays itself under every grade.
GRADES = {
    "natural": None,
    "warm": _lut((1.06, 1.0, 0.86), (8, 2, 0)),
    "cool": _lut((0.86, 0.97, 1.05), (0, 4, 12)),
    "faded": _lut((0.8, 0.8, 0.8), (36, 36, 40)),
    "green": _lut((0.9, 1.04, 0.88), (0, 6, 4)),
    "muted": None,
}


@dataclass(frozen=True)
class Keyframe:
    """Everything that draws keyframe `img` (0–2) of a shot, without the rest of its film."""

    film_id: str
    palette: str
    place_seed: int
    shot_seed: int
    state: Frame
    shot: int
    img: int

    def shot_spec(self) -> str:
        """What draws the shot (its three keyframes share it): grade, seeds, state."""
        return repr((self.palette, self.place_seed, self.shot_seed, self.state.to_list()))

    def fingerprint(self, size: int, shot_spec: str | None = None) -> str:
        """Keys this keyframe's cached embedding at `size` (`shot_spec`: precomputed, for speed)."""
        spec = self.shot_spec() if shot_spec is None else shot_spec
        return hashlib.sha1(f"film|{spec}|{self.img}|{size}|v{FILM_RENDER_VERSION}".encode()).hexdigest()

    def image(self, size: int = 64) -> Image.Image:
        img = render_keyframe(self, size)[0]
        assert img is not None, "render_keyframe draws unless told not to"
        return img

    def boxes(self, size: int) -> list[tuple[int, tuple[int, int, int, int]]]:
        """(who, (x1, y1, x2, y2)) of every figure at `size`, in slot order."""
        return render_keyframe(self, size, draw=False)[1]


def look(who: int) -> tuple[tuple[int, int, int], str | None]:
    """(body colour, hat) of an actor or of an extra (bare-headed)."""
    if who >= 0:
        body, hat = identity_look(who)
        return RGB[body], hat
    return EXTRA_RGB[EXTRA_COLOURS[-1 - who]], None


def render_keyframe(k: Keyframe, size: int = 64,
                    draw: bool = True) -> tuple[Image.Image | None, list[tuple[int, tuple[int, int, int, int]]]]:
    """(image or None, body boxes) of keyframe `k` at `size`×`size`; draw=False only places the
    boxes (the same arithmetic, no pixels)."""
    if size < 16 or size > 4096:
        raise ValueError(f"render size must be in [16, 4096], got {size}")
    ss = 4 if size <= 128 else 2
    s = size * ss
    shot = random.Random(f"shot:{k.shot_seed}:{FILM_RENDER_VERSION}")
    kf = random.Random(f"kf:{k.shot_seed}:{k.img}:{FILM_RENDER_VERSION}")
    img = Image.new("RGB", (s, s)) if draw else None
    # the null canvas still draws every jitter; it stands in for an ImageDraw by swallowing its calls
    d = ImageDraw.Draw(img) if img is not None else cast(ImageDraw.ImageDraw, _NULL)
    draw_background(d, k.state.place, s, random.Random(f"place:{k.place_seed}"))
    for o in k.state.objects:
        draw_object(d, o, s, kf)
    raw = []
    for f in k.state.figures:
        cx = (SLOT_X[f.slot] + shot.uniform(-0.03, 0.03) + kf.uniform(-0.012, 0.012)) * s
        foot = (0.94 + shot.uniform(-0.02, 0.02)) * s
        u = 0.1 * s * shot.uniform(0.95, 1.05)
        arm = kf.uniform(-1, 1)
        body, hat = look(f.who)
        raw.append((f.who, draw_figure(d, body, hat, cx, foot, u, f.facing, f.pose, arm)))
    zoom = max(1.0, shot.uniform(1.0, 1.12) * kf.uniform(0.985, 1.015))
    w = s / zoom
    x0 = min(max((s - w) / 2 + (shot.uniform(-0.03, 0.03) + kf.uniform(-0.01, 0.01)) * s, 0), s - w)
    y0 = min(max((s - w) / 2 + (shot.uniform(-0.02, 0.02) + kf.uniform(-0.008, 0.008)) * s, 0), s - w)
    scale = size / w
    boxes = []
    for who, (a, b, c, e) in raw:
        x1, y1, x2, y2 = (int(round(min(max((v - o) * scale, 0), size)))
                          for v, o in ((a, x0), (b, y0), (c, x0), (e, y0)))
        boxes.append((who, (x1, y1, x2, y2)))
    if img is None:
        return None, boxes
    img = _grade(img, k.palette)
    img = img.resize((size, size), Image.Resampling.LANCZOS, box=(x0, y0, x0 + w, y0 + w))
    return img, boxes


def _grade(img: Image.Image, palette: str) -> Image.Image:
    if palette == "muted":
        return Image.blend(img, img.convert("L").convert("RGB"), 0.4)
    lut = GRADES[palette]
    return img if lut is None else img.point(lut)


class _NullDraw:
    """Swallows drawing calls: `draw_figure`'s geometry without pixels (boxes only)."""

    def __getattr__(self, name: str):
        return lambda *a, **kw: None


_NULL = _NullDraw()
