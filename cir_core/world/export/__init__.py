"""The generated world written in every benchmark format the evaluators read, so a split of the
world can go through `--benchmark cirr --root EXPORT` (or circo, fashioniq, ...) exactly as a
real data set would, and its ITT triplets through the ITT tools.

    python -m cir_core.world.export FORMAT --split S --out DIR [--n-queries N] [--image-size PX]

FORMAT is one of `FORMATS`. Files, keys, ids and image names are laid out as the official
releases lay them out (CIRR, CIRCO, FashionIQ, GeneCIS), as this project documents its own
formats (L-CIRR, MovieNet identity), and as `training/itt` reads them (ITT). Beside them,
`world_export.json` records where every file came from (world split, item and query ids); no
evaluator reads it. docs/WORLD.md ("Exports") says how each world concept maps to each format.
"""
from __future__ import annotations

from .formats import FORMATS, ExportError, export

__all__ = ["FORMATS", "ExportError", "export"]
