"""Robust image loading: any file or upload in, an RGB ``PIL.Image`` out, or an ``ImageLoadError``.

`load_image` is the app's: EXIF orientation applied (a phone photo comes out upright), modes
flattened onto white. `open_as_stored` + `rgb_as_official` decode a benchmark's files as the
official loaders do (`PIL.Image.open(path)`, then `.convert("RGB")` in the preprocessing): the
pixels as stored, no EXIF transposition, PIL's own mode conversion.
"""
from __future__ import annotations

import io
import os
from typing import Callable, Union

import numpy as np
from PIL import Image, ImageOps

from cir_core.errors import ImageLoadError

ImageSource = Union[str, os.PathLike, bytes, Image.Image]

DEFAULT_MAX_PIXELS = 64_000_000


def _describe(src: ImageSource) -> str:
    if isinstance(src, (bytes, bytearray)):
        return "uploaded image"
    if isinstance(src, Image.Image):
        return "in-memory image"
    return repr(os.fspath(src))


def _to_rgb(img: Image.Image) -> Image.Image:
    """Convert any PIL mode to RGB, flattening transparency onto white."""
    if img.mode == "RGB":
        return img
    if img.mode == "P":
        # Palette transparency lives in info, not in the pixels; RGBA makes it explicit.
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif img.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        # PIL's own convert("L") clips these to 0..255; scale by the type's range instead.
        arr = np.asarray(img, dtype=np.float64)
        if img.mode.startswith("I;16"):
            arr = arr / 65535.0
        else:
            lo, hi = float(arr.min()), float(arr.max())
            if img.mode == "F" and lo >= 0.0 and hi <= 1.0:
                lo, hi = 0.0, 1.0  # already a [0, 1] float image: keep its absolute levels
            arr = (arr - lo) / (hi - lo) if hi > lo else np.zeros_like(arr)
        img = Image.fromarray(np.clip(arr * 255.0 + 0.5, 0, 255).astype(np.uint8), mode="L")
    elif img.mode == "PA":
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "RGBa", "La"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")  # L, 1, CMYK, YCbCr, LAB, HSV


def _open(src: ImageSource, name: str) -> Image.Image:
    if isinstance(src, Image.Image):
        return src
    if isinstance(src, (bytes, bytearray)):
        return Image.open(io.BytesIO(bytes(src)))
    path = os.fspath(src)
    if os.path.isdir(path):
        raise ImageLoadError(f"cannot load image {name}: it is a directory")
    if not os.path.exists(path):
        raise ImageLoadError(f"cannot load image {name}: file not found")
    return Image.open(path)


def load_image(src: ImageSource, max_pixels: int = DEFAULT_MAX_PIXELS, draft: int | None = None) -> Image.Image:
    """Load ``src`` (path, raw bytes or PIL image) as an RGB image with EXIF orientation applied.

    ``draft``: the side the caller will resize to; a JPEG is then decoded at the smallest DCT
    scale (1/2, 1/4, 1/8) that still covers it, which is much cheaper for large photos.
    Raises ``ImageLoadError`` naming the source if it is missing, not an image, corrupt,
    truncated, or larger than ``max_pixels`` (checked from the header, before decoding).
    """
    def finish(img: Image.Image) -> Image.Image:
        if draft and img.format == "JPEG":
            img.draft("RGB", (draft, draft))
        img.load()  # force the full decode here so truncation surfaces as our error
        out = _to_rgb(ImageOps.exif_transpose(img))
        if out is not img:  # multi-frame formats keep their file open otherwise
            _close_ours(img, src)
        return out

    return _decode(src, max_pixels, finish)


def open_as_stored(src: ImageSource, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """``src`` decoded as stored: its own mode, no EXIF transposition (what ``PIL.Image.open``
    gives the official benchmark loaders), fully loaded. The same guards and errors as
    ``load_image`` (missing, not an image, corrupt, truncated, over ``max_pixels``)."""
    def finish(img: Image.Image) -> Image.Image:
        img.load()
        return img

    return _decode(src, max_pixels, finish)


def _decode(src: ImageSource, max_pixels: int, finish: Callable[[Image.Image], Image.Image]) -> Image.Image:
    """Open ``src``, refuse it over ``max_pixels`` (from the header: nothing decoded yet), then
    ``finish`` the decode; every failure becomes an ``ImageLoadError`` naming the source."""
    name = _describe(src)
    img = None
    try:
        img = _open(src, name)
        width, height = img.size
        if width * height > max_pixels:
            raise ImageLoadError(
                f"cannot load image {name}: {width}x{height} = {width * height:,} pixels "
                f"exceeds the limit of {max_pixels:,}"
            )
        return finish(img)
    except ImageLoadError:
        _close_ours(img, src)
        raise
    except Image.DecompressionBombError as exc:
        _close_ours(img, src)
        raise ImageLoadError(f"cannot load image {name}: too large ({exc})") from None
    except Image.UnidentifiedImageError:
        raise ImageLoadError(f"cannot load image {name}: not a recognised image format") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        # Truncated or corrupt data surfaces as OSError, SyntaxError (bad headers) or ValueError.
        _close_ours(img, src)
        raise ImageLoadError(f"cannot load image {name}: corrupt or truncated ({exc})") from None


def rgb_as_official(img: Image.Image) -> Image.Image:
    """``img.convert("RGB")`` as the official loaders' preprocessing does it (alpha dropped, not
    flattened), with the file's metadata left behind: a later ``load_image`` of the result (the
    backbone's batch path) must not apply an EXIF or XMP orientation the official code ignores."""
    out = img.convert("RGB")
    if out is img:
        out = img.copy()
    out.info = {}
    return out


def _close_ours(img: Image.Image | None, src: ImageSource) -> None:
    """Close an image we opened (not the caller's) so a failed load leaks no file handle."""
    if img is not None and img is not src:
        img.close()
