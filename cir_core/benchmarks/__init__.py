"""Benchmarks by name: the generated world and the real ones, each under its official protocol.

    python -m cir_core.eval --benchmark cirr --root /data/cirr --split val --methods sum,pact

`load_benchmark(name, root, split, **options)` validates the files (or generates the world) and
returns a `Benchmark` that `cir_core.eval.loop.evaluate` runs; see docs/EVAL_REAL.md for each
layout. A benchmark's files are read by its format's module in `cir_core.formats` (the layout,
the checks, the reader the trainers use too); the modules here score what it read. A new benchmark is a module whose `load(root, split, ...)` is decorated with
`@register_benchmark(name)` (`registry.py`); this package imports every module of itself.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

from . import world  # noqa: F401  (registered first: the default)
from .common import PREPROCESS, Benchmark, BenchmarkError, BenchmarkResult, Embedded, StoredGallery, pick
from .registry import get_benchmark, list_benchmarks, register_benchmark

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):  # every other benchmark module
    importlib.import_module(f"{__name__}.{_m}")

from .movienet import load_movienet_queryset  # noqa: E402

__all__ = ["Benchmark", "BenchmarkError", "BenchmarkResult", "Embedded", "list_benchmarks", "load_benchmark",
           "register_benchmark", "is_generated", "load_movienet_queryset"]


def is_generated(name: str) -> bool:
    """Whether benchmark `name` is generated (no files: no --root; its default split is test)."""
    return get_benchmark(name).generated


def load_benchmark(name: str, root: str | Path | None = None, split: str | None = None,
                   **options: Any) -> Benchmark:
    """The validated benchmark `name` (its files under `root`); BenchmarkError on an unknown
    name, a missing root or bad files. `split` defaults to test for the world, val otherwise.
    `options` are the benchmark's own (`protocol=` for circo and fashioniq, `subset=` for genecis
    and fashioniq, the world's `n_queries=` ...); one that is None is left at its default, and
    one the benchmark does not take is an error. `preprocess=` ("backbone", the default, or
    "targetpad": SEARLE's) applies to every benchmark whose galleries are its files as stored
    (CIRR, CIRCO, FashionIQ, L-CIRR)."""
    entry = get_benchmark(name)
    takes = set(inspect.signature(entry.load).parameters) - {"root", "split"}
    options = {k: v for k, v in options.items() if v is not None}
    preprocess = options.pop("preprocess", None)
    bad = sorted(set(options) - takes)
    if bad:
        flags = ", ".join("--" + k.replace("_", "-") for k in bad)
        raise BenchmarkError(f"{name} has no option {flags}" + (f" (it takes {', '.join(sorted(takes))})"
                                                                if takes else ""))
    split = split or ("test" if entry.generated else "val")
    if not entry.generated:
        if root is None:
            raise BenchmarkError(f"{name} needs --root, the folder holding its files")
        root = Path(root).expanduser()
        if not root.is_dir():
            raise BenchmarkError(f"--root {root}: folder not found")
    bench = entry.load(root, split, **options)
    if preprocess is not None:
        set_preprocess(bench, preprocess)
    return bench


def set_preprocess(bench: Benchmark, preprocess: str) -> None:
    """Every gallery of `bench` decoded with `preprocess` (a `PREPROCESS` name); BenchmarkError
    for a benchmark whose images are not its files as stored (generated, cropped)."""
    pick(preprocess, list(PREPROCESS), "--preprocess", "backbone")
    galleries = list(bench.galleries().values())
    stored = [g for g in galleries if isinstance(g, StoredGallery)]
    if len(stored) < len(galleries):
        raise BenchmarkError(f"--preprocess applies to benchmarks of image files as stored "
                             f"(cirr, circo, fashioniq, lcirr), not {bench.name}")
    for g in stored:
        g.preprocess = preprocess


def images_protocol(bench: Benchmark) -> str | None:
    """How the benchmark's images were preprocessed, for its protocol line (None: generated)."""
    galleries = list(bench.galleries().values())
    stored = [g for g in galleries if isinstance(g, StoredGallery)]
    if not galleries or len(stored) < len(galleries):
        return None
    return PREPROCESS[stored[0].preprocess]
