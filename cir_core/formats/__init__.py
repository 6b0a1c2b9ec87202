"""Data set formats, one module each: the layout (file names, record keys and their checks, image
path rules), the evaluation reader the benchmark of that name scores with (`cir_core.benchmarks`),
the training reader the trainers take as `data=NAME:PATH` (`training.triplets`), and the writer
the generated world is exported with (`python -m cir_core.world.export`), registered together by
`register_format(Format(...))` at the end of the module, so a format is added or fixed in one
file. This package sits below both the benchmarks and the world: it knows files, not scoring and
not the world (a writer takes a `writing.Split`).

    from cir_core.formats import get_format, list_formats
    get_format("cirr").read_train(Path("/data/cirr"))     # [Triplet, ...]
"""
from __future__ import annotations

import importlib
import pkgutil

from .common import FormatError, Triplet
from .registry import Format, get_format, list_formats, register_format
from .writing import Folder, Picture, Query, Split

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):  # every format module registers itself
    importlib.import_module(f"{__name__}.{_m}")

__all__ = ["Folder", "Format", "FormatError", "Picture", "Query", "Split", "Triplet", "get_format", "list_formats",
           "register_format"]
