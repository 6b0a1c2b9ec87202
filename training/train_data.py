"""The one entry to a trainer's frozen-embedding cache: the world's training stream
(`training.embed_cache`) or a real source (`training.real_cache`), by the trainer's `data`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .embed_cache import TrainEmbeddings, build_train_cache


def load_train_cache(backbone: Any, n: int, seed: int = 0, root: Path | None = None, data: str = "world",
                     image_root: str | None = None, workers: int = 0, progress: bool = True) -> TrainEmbeddings:
    """The cache for (backbone, n, seed) of the world's training stream (`data="world"`), or of
    the first `n` triplets of a real source (`itt:FILE`, `cirr:ROOT`, `fashioniq:ROOT`,
    `lcirr:ROOT`), built first if it does not exist yet."""
    if data != "world":
        from .real_cache import build_real_cache

        return build_real_cache(data, backbone, image_root, n, root, workers=workers or 2, progress=progress)
    return build_train_cache(backbone, n, seed, root, workers=workers, progress=progress)
