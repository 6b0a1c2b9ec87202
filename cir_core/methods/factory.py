"""Build a registered method, loading its checkpoint (safetensors + config.json) if it has one."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, Iterator

from cir_core.errors import CheckpointError, CIRError
from cir_core.paths import DEFAULT_CHECKPOINTS

from ..encoder import Encoder
from .base import Method, get_method_class


def default_checkpoint(name: str) -> Path:
    """Where the shipped checkpoint of method `name` lives."""
    return DEFAULT_CHECKPOINTS / name


def create_method(name: str, backbone: Encoder, checkpoint: str | Path | None = None) -> Method:
    """Instantiate method `name` on `backbone`. Trained methods load `checkpoint` (a folder with
    config.json + model.safetensors; default: the shipped one) and refuse one made for another
    embedding dimension."""
    cls = get_method_class(name)
    if not cls.needs_checkpoint:
        return cls(backbone)
    folder = Path(checkpoint) if checkpoint else default_checkpoint(name)
    if not folder.exists():
        raise CheckpointError(f"method {name!r}: no checkpoint at {folder}")
    return cls.from_checkpoint(backbone, folder)


def create_methods(names: Iterable[str], backbone: Encoder, checkpoints: dict[str, str] | None,
                   skipped: dict[str, str]) -> Iterator[tuple[str, Method]]:
    """(name, method) for every name that builds. One that does not (a missing or mismatched
    checkpoint) goes to `skipped` with its reason and to stderr, loudly, so one method cannot
    stop an evaluation table."""
    for name in names:
        try:
            method = create_method(name, backbone, (checkpoints or {}).get(name))
        except CIRError as e:
            skipped[name] = str(e)
            print(f"[skip] {name}: {e}", file=sys.stderr)
            continue
        yield name, method
