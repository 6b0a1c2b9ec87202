"""Deterministic renderer: `render(scene, size, seed)` gives the same pixels for the same inputs.

The seed only jitters placement, scale and background details, never anything a caption or an
edit talks about, so two renders of one scene are two photos of the same ground truth. Drawing
happens on a supersampled canvas so the 64 px images the tiny model sees are anti-aliased, and
the same code draws the large images the app shows.
"""
from __future__ import annotations

import math
import random

from PIL import Image, ImageDraw

from .spec import HATS, Obj, Scene, identity_look

RENDER_VERSION = 1  # bump when pixels change: it is part of every cached embedding's key

RGB = {
    "red": (220, 40, 40), "orange": (250, 140, 20), "yellow": (245, 215, 40),
    "green": (40, 160, 60), "blue": (40, 80, 220), "purple": (140, 60, 190),
    "white": (245, 245, 245), "black": (20, 20, 20),
    "teal": (0, 150, 150), "pink": (255, 140, 200), "brown": (130, 80, 35),
    "grey": (135, 135, 135), "lime": (170, 230, 60), "navy": (25, 35, 110),
}
# (sky top, sky bottom, ground)
BACKGROUND_RGB = {
    "meadow": ((110, 180, 245), (175, 220, 250), (80, 170, 60)),
    "beach": ((120, 200, 250), (190, 230, 255), (240, 220, 150)),
    "desert": ((250, 205, 120), (252, 230, 170), (215, 155, 80)),
    "snowfield": ((180, 190, 205), (215, 222, 232), (250, 250, 255)),
    "night": ((10, 12, 40), (30, 35, 80), (40, 40, 65)),
    "city": ((165, 175, 190), (200, 205, 215), (105, 105, 110)),
    "forest": ((140, 195, 165), (185, 220, 195), (35, 95, 45)),
    "sunset": ((120, 50, 130), (250, 140, 80), (90, 50, 60)),
}
SLOT_X = {"left": 0.18, "center": 0.5, "right": 0.82}
HORIZON = 0.58
OBJ_RADIUS = {"small": 0.07, "large": 0.125}


def render(scene: Scene, size: int = 64, seed: int = 0) -> Image.Image:
    """Render `scene` as a `size`×`size` RGB image; `seed` picks the jitter."""
    if size < 16 or size > 4096:
        raise ValueError(f"render size must be in [16, 4096], got {size}")
    ss = 4 if size <= 128 else 2
    s = size * ss
    rng = random.Random(f"{seed}:{RENDER_VERSION}")
    img = Image.new("RGB", (s, s))
    d = ImageDraw.Draw(img)
    draw_background(d, scene.background, s, rng)
    for o in scene.objects:
        draw_object(d, o, s, rng)
    _character(d, scene, s, rng)
    return img.resize((size, size), Image.Resampling.LANCZOS) if ss > 1 else img


def _lerp(a: tuple, b: tuple, t: float) -> tuple:
    return tuple(int(x + (y - x) * t) for x, y in zip(a, b))


def draw_background(d: ImageDraw.ImageDraw, name: str, s: int, rng: random.Random) -> None:
    """Sky, ground and `name`'s details on an s×s canvas (details drawn from `rng`)."""
    top, bottom, ground = BACKGROUND_RGB[name]
    h = int(HORIZON * s)
    bands = 16
    for i in range(bands):  # banded gradient: cheap and still reads as a sky
        d.rectangle([0, i * h // bands, s, (i + 1) * h // bands], fill=_lerp(top, bottom, i / bands))
    d.rectangle([0, h, s, s], fill=ground)
    if name == "night":
        for _ in range(18):
            x, y, r = rng.uniform(0, s), rng.uniform(0, h * 0.9), s * 0.006
            d.ellipse([x - r, y - r, x + r, y + r], fill=(250, 250, 210))
    elif name == "city":
        x = 0.0
        while x < s:
            w, bh = rng.uniform(0.08, 0.16) * s, rng.uniform(0.12, 0.3) * s
            d.rectangle([x, h - bh, x + w, h], fill=(85, 88, 100))
            x += w + rng.uniform(0.0, 0.03) * s
    elif name == "forest":
        for _ in range(9):
            x, th = rng.uniform(0, s), rng.uniform(0.12, 0.22) * s
            d.polygon([(x - th * 0.35, h), (x + th * 0.35, h), (x, h - th)], fill=(20, 70, 35))
    elif name == "beach":
        d.rectangle([0, h - 0.04 * s, s, h], fill=(40, 120, 200))
    elif name == "desert":
        cx, r = rng.uniform(0.6, 0.9) * s, 0.05 * s
        d.ellipse([cx - r, 0.06 * s, cx + r, 0.06 * s + 2 * r], fill=(255, 245, 200))
    elif name == "snowfield":
        for _ in range(3):
            x, w = rng.uniform(0, s), rng.uniform(0.2, 0.4) * s
            d.polygon([(x - w / 2, h), (x + w / 2, h), (x, h - 0.12 * s)], fill=(225, 230, 240))


def draw_object(d: ImageDraw.ImageDraw, o: Obj, s: int, rng: random.Random) -> None:
    """A floating object in its slot, its centre and radius jittered from `rng`."""
    cx = (SLOT_X[o.position] + rng.uniform(-0.035, 0.035)) * s
    cy = (0.25 + rng.uniform(-0.04, 0.04)) * s
    r = OBJ_RADIUS[o.size] * rng.uniform(0.92, 1.08) * s
    col, outline, w = RGB[o.colour], (60, 60, 60), max(1, int(s * 0.006))
    if o.shape == "circle":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=col, outline=outline, width=w)
    elif o.shape == "square":
        q = r * 0.88
        d.rectangle([cx - q, cy - q, cx + q, cy + q], fill=col, outline=outline, width=w)
    elif o.shape == "triangle":
        pts = [(cx + r * math.cos(a), cy + r * math.sin(a))
               for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
        d.polygon(pts, fill=col, outline=outline, width=w)
    elif o.shape == "star":
        pts = [(cx + (r if i % 2 == 0 else r * 0.45) * math.cos(-math.pi / 2 + i * math.pi / 5),
                cy + (r if i % 2 == 0 else r * 0.45) * math.sin(-math.pi / 2 + i * math.pi / 5))
               for i in range(10)]
        d.polygon(pts, fill=col, outline=outline, width=w)
    elif o.shape == "cross":
        a, b = r, r * 0.33
        d.rectangle([cx - a, cy - b, cx + a, cy + b], fill=col)
        d.rectangle([cx - b, cy - a, cx + b, cy + a], fill=col)
    else:
        raise ValueError(f"unknown shape {o.shape!r}")


def _character(d: ImageDraw.ImageDraw, scene: Scene, s: int, rng: random.Random) -> None:
    c = scene.character
    body_name, hat = identity_look(c.identity)
    cx = (SLOT_X[c.position] + rng.uniform(-0.03, 0.03)) * s
    foot = (0.94 + rng.uniform(-0.02, 0.02)) * s
    u = 0.1 * s * rng.uniform(0.95, 1.05)  # body unit
    draw_figure(d, RGB[body_name], hat, cx, foot, u, c.facing)


POSES = ("standing", "sitting", "arms up")


def draw_figure(d: ImageDraw.ImageDraw, body: tuple, hat: str | None, cx: float, foot: float, u: float,
                facing: str, pose: str = "standing", arm: float = 0.0) -> tuple[float, float, float, float]:
    """A figure whose feet touch `foot` at x = `cx`, body unit `u`, in `pose` ("standing" draws
    what the world's character always was), `hat` one of HATS or None (bare-headed: an extra);
    `arm` in [-1, 1] tilts raised arms. Returns its body box (x0, y0, x1, y1) on the canvas."""
    dark = _lerp(body, (0, 0, 0), 0.45)
    sgn = -1 if facing == "left" else 1
    lw = max(1, int(0.08 * u))
    if pose == "sitting":  # on a stool, thighs forward: the head drops by `drop`
        drop = 0.8 * u
        d.rectangle([cx - 0.6 * u, foot - 0.75 * u, cx + 0.6 * u, foot], fill=(95, 60, 30))  # the stool
        d.rectangle([cx - 0.3 * u, foot - 1.15 * u, cx + sgn * 1.35 * u, foot - 0.75 * u] if sgn > 0 else
                    [cx + sgn * 1.35 * u, foot - 1.15 * u, cx + 0.3 * u, foot - 0.75 * u], fill=dark)
        shin = cx + sgn * 1.15 * u
        d.rectangle([min(shin, shin + sgn * 0.4 * u), foot - 1.1 * u, max(shin, shin + sgn * 0.4 * u), foot],
                    fill=dark)
        d.rounded_rectangle([cx - 0.8 * u, foot - 2.6 * u + drop, cx + 0.8 * u, foot - 0.8 * u + 0.35 * u],
                            radius=0.3 * u, fill=body, outline=dark, width=lw)
    else:
        drop = 0.0
        # legs, body
        d.rectangle([cx - 0.55 * u, foot - 0.9 * u, cx - 0.15 * u, foot], fill=dark)
        d.rectangle([cx + 0.15 * u, foot - 0.9 * u, cx + 0.55 * u, foot], fill=dark)
        d.rounded_rectangle([cx - 0.8 * u, foot - 2.6 * u, cx + 0.8 * u, foot - 0.8 * u],
                            radius=0.3 * u, fill=body, outline=dark, width=lw)
        if pose == "arms up":
            for sx in (-1, 1):
                x0, y0 = cx + sx * 0.65 * u, foot - 2.35 * u
                d.line([x0, y0, x0 + sx * (0.55 + 0.15 * arm) * u, y0 - 1.45 * u], fill=dark,
                       width=max(1, int(0.32 * u)))
        elif pose != "standing":
            raise ValueError(f"unknown pose {pose!r}")
    # head in the body colour, lightened; the face looks where the figure faces
    hy, hr = foot - 3.25 * u + drop, 0.65 * u
    d.ellipse([cx - hr, hy - hr, cx + hr, hy + hr], fill=_lerp(body, (255, 255, 255), 0.45),
              outline=dark, width=lw)
    ex = cx + sgn * 0.3 * u
    for dx in (-0.14 * u, 0.14 * u):
        d.ellipse([ex + dx - 0.1 * u, hy - 0.18 * u, ex + dx + 0.1 * u, hy + 0.02 * u], fill=(0, 0, 0))
    d.polygon([(cx + sgn * 0.6 * u, hy), (cx + sgn * 0.95 * u, hy + 0.12 * u),
               (cx + sgn * 0.6 * u, hy + 0.25 * u)], fill=(230, 120, 40))  # nose shows facing
    top = hy - hr
    _hat(d, hat, cx, top, u)
    reach = 1.45 * u if pose == "sitting" else 0.95 * u
    x0, x1 = (cx - 0.95 * u, cx + reach) if sgn > 0 else (cx - reach, cx + 0.95 * u)
    rise = 0.0 if hat is None else {HATS[0]: 0.85, HATS[1]: 0.6, HATS[2]: 0.7, HATS[3]: 1.05}.get(hat, 0.0)
    head_top = top - rise * u
    if pose == "arms up":
        head_top = min(head_top, foot - 3.85 * u)
        x0, x1 = min(x0, cx - 1.35 * u), max(x1, cx + 1.35 * u)
    return x0, head_top, x1, foot


def _hat(d: ImageDraw.ImageDraw, hat: str | None, cx: float, top: float, u: float) -> None:
    if hat is None:
        return
    if hat == HATS[0]:  # top hat
        d.rectangle([cx - 0.75 * u, top - 0.05 * u, cx + 0.75 * u, top + 0.12 * u], fill=(15, 15, 15))
        d.rectangle([cx - 0.45 * u, top - 0.85 * u, cx + 0.45 * u, top], fill=(15, 15, 15))
    elif hat == HATS[1]:  # crown
        pts = [(cx - 0.55 * u, top + 0.15 * u), (cx - 0.55 * u, top - 0.55 * u),
               (cx - 0.27 * u, top - 0.2 * u), (cx, top - 0.6 * u), (cx + 0.27 * u, top - 0.2 * u),
               (cx + 0.55 * u, top - 0.55 * u), (cx + 0.55 * u, top + 0.15 * u)]
        d.polygon(pts, fill=(250, 200, 0), outline=(150, 110, 0))
    elif hat == HATS[2]:  # horns
        for sx in (-1, 1):
            d.polygon([(cx + sx * 0.2 * u, top + 0.15 * u), (cx + sx * 0.6 * u, top + 0.2 * u),
                       (cx + sx * 0.75 * u, top - 0.7 * u)], fill=(245, 240, 225), outline=(90, 80, 70))
    else:  # antenna
        d.line([cx, top, cx, top - 0.8 * u], fill=(30, 30, 30), width=max(1, int(0.12 * u)))
        d.ellipse([cx - 0.25 * u, top - 1.05 * u, cx + 0.25 * u, top - 0.55 * u], fill=(230, 30, 30))
