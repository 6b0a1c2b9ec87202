"""The generated world written in every benchmark format the evaluators read, so a split of the
world can go through `--benchmark cirr --root EXPORT` (or circo, fashioniq, ...) exactly as a
real data set would, and its ITT triplets through the ITT tools.

    python -m cir_core.world.export FORMAT --split S --out DIR [--n-queries N] [--image-size PX]

FORMAT is one of `FORMATS`. Files, keys, ids and image names are laid out as the official
releases lay them out (CIRR, CIRCO, FashionIQ, GeneCIS), as this project documents its own
formats (L-CIRR, MovieNet identity), and as the trainers read them (ITT). Each format's writer is
its own module's in `cir_core.formats`, beside its readers; here are the world's side (`mapping.py`:
the world as a `cir_core.formats.Split`), the dispatcher (`run.py`), the film world in MovieNet's
release layout (`movienet_release.py`: a source release the MovieNet set builder consumes, not a
benchmark's layout) and the round-trip check (`check.py`). Beside the files,
`world_export.json` records where every file came from (world split, item and query ids); no
evaluator reads it. docs/WORLD.md ("Exports") says how each world concept maps to each format.
"""
from __future__ import annotations

from .run import FORMATS, PROVENANCE, ExportError, export, world_queries

__all__ = ["FORMATS", "PROVENANCE", "ExportError", "export", "world_queries"]
