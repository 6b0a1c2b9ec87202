"""The one entry to a trainer's frozen-embedding cache: the world's training stream
(`training.embed_cache`) or a real source (`training.real_cache`), by the trainer's `data`."""
from __future__ import annotations

from pathlib import Path

from cir_core.encoder import TensorEncoder
from cir_core.errors import InputError
from cir_core.world.films.stream import FILM_SHARE

from .embed_cache import TrainEmbeddings, build_train_cache


def load_train_cache(backbone: TensorEncoder, n: int, seed: int = 0, root: Path | None = None, data: str = "world",
                     image_root: str | None = None, workers: int = 0, progress: bool = True) -> TrainEmbeddings:
    """The cache for (backbone, n, seed) of the world's training stream (`data="world"`: world and
    film queries; `world:films=F` another film share, `world:films=0` the world's alone, as its
    benchmark exports hold it), or of the first `n` triplets of a real source (`itt:FILE`,
    `cirr:ROOT`, `fashioniq:ROOT`, `lcirr:ROOT`), built first if it does not exist yet."""
    if data == "world" or data.startswith("world:"):
        return build_train_cache(backbone, n, seed, root, workers=workers, progress=progress,
                                 films=film_share(data))
    if data:
        from .real_cache import build_real_cache

        return build_real_cache(data, backbone, image_root, n, root, workers=workers or 2, progress=progress)
    raise InputError("data is empty: world, world:films=F or a real source (itt:FILE, cirr:ROOT, ...)")


def film_share(data: str) -> float:
    """The film share a world data spec asks for (`world`: the stream's default)."""
    if data == "world":
        return FILM_SHARE
    key, _, value = data.partition(":")[2].partition("=")
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if key != "films" or not 0.0 <= share <= 1.0:
        raise InputError(f"data={data!r}: a world spec is 'world' or 'world:films=F' with F in [0, 1]")
    return share
