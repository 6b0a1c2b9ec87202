"""The reference's character, marked: which person on a frame of several is the one whose
identity must be preserved (MovieNet's body box of the query's credited cast member, and the
character's name). Drawn on the reference wherever it is shown (the Annotate tab, Compare,
exported figures); candidates are never marked, so annotators judge them without a hint."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from PIL import Image, ImageDraw

MIN_SIDE = 256  # pixels: the shorter side a marked picture is drawn at, at least
BOX_RGB = (255, 200, 0)  # amber: distinct from the green target frame and the blue same-character dot


@dataclass(frozen=True)
class CharacterMark:
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in `resolution` pixels
    resolution: tuple[int, int] | None = None  # the frame the box is measured in (None: the image's size)
    name: str = ""
    pid: str | None = None  # the credited cast id the box belongs to


def mark_from(character: Mapping[str, Any] | None, resolution: Any = None) -> CharacterMark | None:
    """A mark from {"box" | "character_box", "name" | "character_name", "pid" | "character_id"}
    (a gallery item's `reference_character` or a query's meta) and the frame's resolution; None
    when there is no valid box."""
    if not character:
        return None
    box = character.get("box", character.get("character_box"))
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in box)
    except (TypeError, ValueError):
        return None
    if x2 <= x1 or y2 <= y1:
        return None
    res = (int(resolution[0]), int(resolution[1])) if isinstance(resolution, (list, tuple)) \
        and len(resolution) == 2 and all(isinstance(v, (int, float)) and v > 0 for v in resolution) else None
    name = character.get("name", character.get("character_name")) or ""
    pid = character.get("pid", character.get("character_id"))
    return CharacterMark((x1, y1, x2, y2), res, str(name), str(pid) if pid else None)


def draw_mark(img: Image.Image, mark: CharacterMark | None) -> Image.Image:
    """A copy of `img` with the character's box (and name, when known) drawn, enlarged to
    MIN_SIDE first when smaller; `img` itself when `mark` is None."""
    if mark is None:
        return img
    out = img.convert("RGB")
    if min(out.size) < MIN_SIDE:  # a small frame: enlarge first, so the box and name stay legible
        f = MIN_SIDE / min(out.size)
        out = out.resize((round(out.width * f), round(out.height * f)), Image.Resampling.LANCZOS)
    else:
        out = out.copy()
    w, h = out.size
    rw, rh = mark.resolution or (w, h)
    sx, sy = w / rw, h / rh
    x1, y1, x2, y2 = mark.box
    box = (max(0, x1 * sx), max(0, y1 * sy), min(w - 1, x2 * sx), min(h - 1, y2 * sy))
    d = ImageDraw.Draw(out)
    t = max(2, min(w, h) // 60)
    for i in range(t):
        d.rectangle((box[0] - i, box[1] - i, box[2] + i, box[3] + i), outline=BOX_RGB)
    if mark.name:
        tw, th = d.textbbox((0, 0), mark.name)[2:]
        ty = box[1] - th - 4 if box[1] - th - 4 >= 0 else box[1] + t
        d.rectangle((box[0], ty, box[0] + tw + 4, ty + th + 3), fill=BOX_RGB)
        d.text((box[0] + 2, ty + 1), mark.name, fill=(0, 0, 0))
    return out
