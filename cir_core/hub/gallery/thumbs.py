"""A gallery's display thumbnails packed into a few `.npy` shards of JPEG bytes (a Hub repo should
hold ~100k files at most, and one file per thumbnail would double a large gallery's count):
`write_thumbs` makes them when a gallery is pushed, `ThumbPack` reads one thumbnail back."""
from __future__ import annotations

import io
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image

from ...errors import GalleryError, ImageLoadError
from ...fileio import atomic_write
from ...imageio import load_image
from .layout import OFFSETS, thumb_shard

PER_SHARD = 8192  # ~40-60 MB of 160 px JPEGs per shard
QUALITY = 85
THUMB_PIXELS = 4096 * 4096  # a thumbnail is small: a larger header is a bomb, not a thumbnail


def thumbnail_bytes(path: str, size: int) -> bytes:
    """JPEG bytes of the image at `path`, shrunk to fit `size` x `size` (never enlarged)."""
    img = load_image(path, draft=size)
    img.thumbnail((size, size))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=QUALITY)
    return buf.getvalue()


def write_thumbs(paths: Sequence[str], out: Path, size: int, per_shard: int = PER_SHARD,
                 workers: int = 2, progress: bool = False) -> int:
    """Thumbnails of `paths` (in order) into `out/thumbs/`; returns the number of shards. Frames
    are decoded by `workers` threads (PIL releases the GIL while it decodes and resizes)."""
    from ...progress import bar as progress_bar

    (out / OFFSETS).parent.mkdir(parents=True, exist_ok=True)
    offsets = np.zeros((len(paths), 2), np.int64)
    n_shards = -(-len(paths) // per_shard)
    with ThreadPoolExecutor(max(1, workers)) as pool, \
            progress_bar(total=len(paths), unit="thumb", desc="thumbnails", disable=not progress) as bar:
        for s in range(n_shards):
            rows = range(s * per_shard, min(len(paths), (s + 1) * per_shard))
            blobs = []
            for b in pool.map(lambda i: thumbnail_bytes(paths[i], size), rows):
                blobs.append(b)
                bar.update(1)
            sizes = np.array([len(b) for b in blobs], np.int64)
            offsets[rows.start:rows.stop] = np.stack([np.cumsum(sizes) - sizes, np.cumsum(sizes)], 1)
            blob = np.frombuffer(b"".join(blobs), np.uint8)
            atomic_write(out / thumb_shard(s), partial(np.save, arr=blob, allow_pickle=False), True)
    atomic_write(out / OFFSETS, lambda f: np.save(f, offsets, allow_pickle=False), True)
    return n_shards


class ThumbPack:
    """The thumbnails of a pulled gallery: shards memory-mapped (read only where a page shows
    them), each thumbnail decoded on demand."""

    def __init__(self, folder: Path, n: int, per_shard: int, n_shards: int, where: str):
        try:
            self.offsets = np.load(folder / OFFSETS, allow_pickle=False)
            self.shards = [np.load(folder / thumb_shard(s), mmap_mode="r", allow_pickle=False)
                           for s in range(n_shards)]
        except (OSError, ValueError) as exc:
            raise GalleryError(f"{where}: the thumbnails cannot be read ({type(exc).__name__}: {exc})") from None
        self.per_shard, self.where = per_shard, where
        if self.offsets.shape != (n, 2) or n_shards != -(-n // per_shard) or \
                any(s.dtype != np.uint8 or s.ndim != 1 for s in self.shards):
            raise GalleryError(f"{where}: thumbnails do not match the gallery's {n} frames "
                               f"({OFFSETS} is {self.offsets.shape}, {n_shards} shards of {per_shard})")

    def image(self, i: int) -> Image.Image:
        """Frame `i`'s thumbnail (RGB); GalleryError when its bytes are not an image."""
        start, stop = (int(v) for v in self.offsets[i])
        shard = self.shards[i // self.per_shard]
        if not 0 <= start <= stop <= len(shard):
            raise GalleryError(f"{self.where}: thumbnail {i} points outside its shard")
        try:
            return load_image(shard[start:stop].tobytes(), max_pixels=THUMB_PIXELS)
        except ImageLoadError as exc:
            raise GalleryError(f"{self.where}: thumbnail {i} is not a readable image ({exc})") from None
