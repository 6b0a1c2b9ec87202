"""`export`: a split of the world written in a format. The split is the world's (a benchmark's
gallery and queries, or the training stream), mapped onto the formats by `mapping.py`; the files
are written by the format's own writer (`cir_core.formats`, registered with its readers), and
`world_export.json` (the provenance: world split, item and query ids behind every exported name)
beside them."""
from __future__ import annotations

import inspect
from itertools import islice
from pathlib import Path
from typing import Any

from cir_core.errors import InputError
from cir_core.formats import Folder, get_format, list_formats
from cir_core.formats.fashioniq import CATEGORIES

from ..benchmark import build_benchmark
from ..data import WorldQuery, query_stream
from ..render import RENDER_VERSION
from .mapping import gallery_split, query_split

# Written here, not by a format: movienet-release is a source release the MovieNet set builder
# consumes (read by cir_core.benchmarks.movienet.release), not a benchmark's layout.
OWN = ("movienet-release",)
FORMATS = (*list_formats("write"), *OWN)
TRAIN_FORMATS = tuple(list_formats("write_train"))  # the formats whose train split a trainer reads (data=)
SPLITS = ("test", "val", "train")
DEFAULT_N = {"test": 1000, "val": 500, "train": 1000}  # the world benchmark's defaults (train: the stream)
DEFAULT_SIZE = 64
PROVENANCE = "world_export.json"


class ExportError(InputError):
    """A bad export request: unknown format or split, a folder that is not empty."""


def world_queries(n: int) -> list[WorldQuery]:
    """The training stream's first `n` queries (`query_stream(seed=0)`)."""
    return list(islice(query_stream(0), n))


def export(fmt: str, split: str, out: str | Path, n_queries: int | None = None, image_size: int = DEFAULT_SIZE,
           category: str = "dress", progress: bool = False, n_films: int | None = None) -> dict[str, Any]:
    """Write the world's `split` in format `fmt` under `out` (a new or empty folder); returns a
    summary. The split is `cir_core.world.build_benchmark(split, n_queries)`, the same one
    `--benchmark world --split S --n-queries N` evaluates (train: the training stream); for
    movienet-release, the film benchmark `build_film_benchmark(split, n_queries, n_films)`
    (`--benchmark films`)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if split not in SPLITS or (split == "train" and fmt not in TRAIN_FORMATS):
        raise ExportError(f"the world's splits are test and val (train: {', '.join(TRAIN_FORMATS)} only), "
                          f"not {split!r} for {fmt}")
    n = DEFAULT_N[split] if n_queries is None else n_queries
    if n < 1:
        raise ExportError(f"--n-queries must be >= 1, got {n}")
    if not 16 <= image_size <= 4096:
        raise ExportError(f"--image-size must be in 16..4096, got {image_size}")
    if category not in CATEGORIES:
        raise ExportError(f"--category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    if n_films is not None and (fmt != "movienet-release" or n_films < 1):
        raise ExportError(f"--n-films is movienet-release's (>= 1), got {n_films} for {fmt}")
    root = Path(out).expanduser()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ExportError(f"--out {root}: give a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    o = Folder(root, image_size, progress)
    source = f"cir_core.world.build_benchmark({split!r}, {n})"
    if fmt == "movienet-release":
        from ..films.benchmark import build_film_benchmark
        from .movienet_release import export_movienet_release

        summary = export_movienet_release(build_film_benchmark(split, n, n_films), o, split)
        source = f"cir_core.world.films.build_film_benchmark({split!r}, {n}, {n_films})"
    elif split == "train":
        write = get_format(fmt).write_train
        assert write is not None
        summary = write(query_split(world_queries(n), image_size, split), o)
        source = f"cir_core.world.query_stream(0), first {n}"
    else:
        f = get_format(fmt)
        assert f.write is not None
        bench = build_benchmark(split, n)
        data = gallery_split(bench, image_size) if f.gallery else query_split(bench.queries, image_size, split)
        takes = inspect.signature(f.write).parameters  # the format's own options (fashioniq: category)
        summary = f.write(data, o, **{k: v for k, v in {"category": category}.items() if k in takes})
    summary = {"format": fmt, "world_split": split, "n_queries": n, "image_size": image_size,
               "out": str(root), "images": o.n_images, **summary, "notes": o.notes}
    o.json(PROVENANCE, {**summary, "source": source, "render_version": RENDER_VERSION,
                        "items": o.items, "queries": o.queries})
    return summary
