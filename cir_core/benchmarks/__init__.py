"""Official-protocol evaluators for real CIR benchmarks, by name.

    python -m cir_core.eval --benchmark cirr --root /data/cirr --split val --methods sum,pact

`load_benchmark(name, root, split)` validates the files and returns an object that
`common.run(bench, backbone, methods, ...)` evaluates; see docs/EVAL_REAL.md for each layout.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from .common import BenchmarkError, format_table, run
from .movienet import load_movienet_queryset

# name -> module; each module has load(root, split) and a bench with evaluate_method.
BENCHMARKS = {"cirr": "cirr", "circo": "circo", "fashioniq": "fashioniq", "genecis": "genecis",
              "lcirr": "lcirr", "movienet": "movienet"}

__all__ = ["BENCHMARKS", "BenchmarkError", "list_benchmarks", "load_benchmark", "run", "format_table",
           "load_movienet_queryset"]


def list_benchmarks() -> list[str]:
    return list(BENCHMARKS)


def load_benchmark(name: str, root: str | Path, split: str = "val"):
    """The validated benchmark `name` under `root`; BenchmarkError on an unknown name or bad files."""
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise BenchmarkError(f"--root {root}: folder not found")
    module = importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")
    return module.load(root, split)
