"""Formats registered by name, each with everything this project does with it: a format module
ends with one `register_format(Format(...))` naming its evaluation reader, its training reader
and its writers, so a format is added or fixed in its own file."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import FormatError, Triplet

# A training reader: the triplets of a root folder (or a file: ITT), images under `image_root`
# where the format lets the images live elsewhere.
TrainReader = Callable[[Path, "str | None"], list[Triplet]]
# A writer: a `Split` laid out in a `Folder` as the format's release does (plus the format's own
# options: FashionIQ's category); returns a summary.
Writer = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class Format:
    """A data set format: where it is documented, who reads it, who writes it."""

    name: str
    description: str
    benchmark: str | None = None  # the benchmark that evaluates it (`--benchmark NAME`)
    read: Callable[..., Any] | None = None  # the evaluation reader (what that benchmark loads)
    read_train: TrainReader | None = None  # `data=NAME:PATH` for the trainers
    write: Writer | None = None  # a test or val split, from a gallery (`Split` of gallery pictures)
    write_train: Writer | None = None  # a train split, from a stream of queries with their own pictures
    gallery: bool = True  # its test/val splits rank a gallery (False: each query brings its own pictures, as ITT's)
    order: int = 100  # where it stands in lists (`data=` kinds, export formats)


_REGISTRY: dict[str, Format] = {}


def register_format(fmt: Format) -> Format:
    if fmt.name in _REGISTRY and _REGISTRY[fmt.name] != fmt:
        raise ValueError(f"format name {fmt.name!r} registered twice")
    _REGISTRY[fmt.name] = fmt
    return fmt


def get_format(name: str) -> Format:
    if name not in _REGISTRY:
        raise FormatError(f"unknown format {name!r}; choose from {', '.join(list_formats())}")
    return _REGISTRY[name]


def list_formats(has: str | None = None) -> list[str]:
    """Registered format names in their declared order; `has`: only those with that field set
    ("read", "read_train", "write", "write_train")."""
    fmts = sorted(_REGISTRY.values(), key=lambda f: (f.order, f.name))
    return [f.name for f in fmts if has is None or getattr(f, has) is not None]

