"""Benchmarks by name: the generated world and the real ones, each under its official protocol.

    python -m cir_core.eval --benchmark cirr --root /data/cirr --split val --methods sum,pact

`load_benchmark(name, root, split, **options)` validates the files (or generates the world) and
returns a `Benchmark` that `cir_core.evaluation.evaluate` runs; see docs/EVAL_REAL.md for each
layout. A new benchmark is a module with `load(root, split, ...)` registered in `BENCHMARKS`.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from .common import Benchmark, BenchmarkError, BenchmarkResult
from .movienet import load_movienet_queryset

# name -> module under cir_core.benchmarks; each has load(root, split, ...) -> a Benchmark.
BENCHMARKS = {"world": "world", "cirr": "cirr", "circo": "circo", "fashioniq": "fashioniq",
              "genecis": "genecis", "lcirr": "lcirr", "movienet": "movienet"}
GENERATED = ("world",)  # no files: no --root

__all__ = ["BENCHMARKS", "Benchmark", "BenchmarkError", "BenchmarkResult", "list_benchmarks",
           "load_benchmark", "load_movienet_queryset"]


def list_benchmarks() -> list[str]:
    return list(BENCHMARKS)


def load_benchmark(name: str, root: str | Path | None = None, split: str | None = None,
                   **options: Any) -> Benchmark:
    """The validated benchmark `name` (its files under `root`); BenchmarkError on an unknown
    name, a missing root or bad files. `split` defaults to test for the world, val otherwise."""
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
    module = importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")
    split = split or ("test" if name in GENERATED else "val")
    if name in GENERATED:
        return module.load(root, split, **options)
    if root is None:
        raise BenchmarkError(f"{name} needs --root, the folder holding its files")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise BenchmarkError(f"--root {root}: folder not found")
    return module.load(root, split, **options)
