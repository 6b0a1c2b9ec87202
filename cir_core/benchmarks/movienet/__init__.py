"""MovieNet: the identity set the app pools and evaluates (`queryset.py`, `--benchmark movienet`;
its layout and reader are its format's, `cir_core.formats.movienet`),
MovieNet's release layout as published (`release.py`), and the set builder that turns a release
into an identity-200 or qualitative-1151-shaped set (`build.py`; its command line is
`python -m cir_core.benchmarks.movienet build`, `__main__.py`)."""
from __future__ import annotations

from .queryset import KS, MovieNetBench, load, load_movienet_queryset

__all__ = ["KS", "MovieNetBench", "load", "load_movienet_queryset"]
