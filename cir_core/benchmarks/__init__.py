"""Benchmarks by name: the generated world and the real ones, each under its official protocol.

    python -m cir_core.eval --benchmark cirr --root /data/cirr --split val --methods sum,pact

`load_benchmark(name, root, split, **options)` validates the files (or generates the world) and
returns a `Benchmark` that `cir_core.evaluation.evaluate` runs; see docs/EVAL_REAL.md for each
layout. A new benchmark is a module with `load(root, split, ...)` registered in `BENCHMARKS`.
"""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

from .common import PREPROCESS, Benchmark, BenchmarkError, BenchmarkResult, StoredGallery, pick
from .movienet import load_movienet_queryset

# name -> module under cir_core.benchmarks; each has load(root, split, ...) -> a Benchmark.
BENCHMARKS = {"world": "world", "cirr": "cirr", "circo": "circo", "fashioniq": "fashioniq",
              "genecis": "genecis", "lcirr": "lcirr", "movienet": "movienet", "films": "films"}
GENERATED = ("world", "films")  # no files: no --root

__all__ = ["BENCHMARKS", "Benchmark", "BenchmarkError", "BenchmarkResult", "list_benchmarks",
           "load_benchmark", "load_movienet_queryset"]


def list_benchmarks() -> list[str]:
    return list(BENCHMARKS)


def load_benchmark(name: str, root: str | Path | None = None, split: str | None = None,
                   **options: Any) -> Benchmark:
    """The validated benchmark `name` (its files under `root`); BenchmarkError on an unknown
    name, a missing root or bad files. `split` defaults to test for the world, val otherwise.
    `options` are the benchmark's own (`protocol=` for circo and fashioniq, `subset=` for genecis
    and fashioniq, the world's `n_queries=` ...); one that is None is left at its default, and
    one the benchmark does not take is an error. `preprocess=` ("backbone", the default, or
    "targetpad": SEARLE's) applies to every benchmark whose galleries are its files as stored
    (CIRR, CIRCO, FashionIQ, L-CIRR)."""
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
    module = importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")
    takes = set(inspect.signature(module.load).parameters) - {"root", "split"}
    options = {k: v for k, v in options.items() if v is not None}
    preprocess = options.pop("preprocess", None)
    bad = sorted(set(options) - takes)
    if bad:
        flags = ", ".join("--" + k.replace("_", "-") for k in bad)
        raise BenchmarkError(f"{name} has no option {flags}" + (f" (it takes {', '.join(sorted(takes))})"
                                                                if takes else ""))
    split = split or ("test" if name in GENERATED else "val")
    if name not in GENERATED:
        if root is None:
            raise BenchmarkError(f"{name} needs --root, the folder holding its files")
        root = Path(root).expanduser()
        if not root.is_dir():
            raise BenchmarkError(f"--root {root}: folder not found")
    bench = module.load(root, split, **options)
    if preprocess is not None:
        set_preprocess(bench, preprocess)
    return bench


def set_preprocess(bench: Benchmark, preprocess: str) -> None:
    """Every gallery of `bench` decoded with `preprocess` (a `PREPROCESS` name); BenchmarkError
    for a benchmark whose images are not its files as stored (generated, cropped)."""
    pick(preprocess, list(PREPROCESS), "--preprocess", "backbone")
    galleries = bench.galleries().values()
    if not all(isinstance(g, StoredGallery) for g in galleries):
        raise BenchmarkError(f"--preprocess applies to benchmarks of image files as stored "
                             f"(cirr, circo, fashioniq, lcirr), not {bench.name}")
    for g in galleries:
        g.preprocess = preprocess


def images_protocol(bench: Benchmark) -> str | None:
    """How the benchmark's images were preprocessed, for its protocol line (None: generated)."""
    galleries = list(bench.galleries().values())
    if not galleries or not all(isinstance(g, StoredGallery) for g in galleries):
        return None
    return PREPROCESS[galleries[0].preprocess]
