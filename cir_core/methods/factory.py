"""Build a registered method, loading its checkpoint (safetensors + config.json) if it has one."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from cir_core.errors import CheckpointError

from .base import Method, get_method_class

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "methods"


def default_checkpoint(name: str) -> Path:
    """Where the shipped checkpoint of method `name` lives."""
    return ASSETS / name


def create_method(name: str, backbone: Any, checkpoint: str | Path | None = None) -> Method:
    """Instantiate method `name` on `backbone`. Trained methods load `checkpoint` (a folder with
    config.json + model.safetensors; default: the shipped one) and refuse one made for another
    embedding dimension."""
    cls = get_method_class(name)
    if not cls.needs_checkpoint:
        return cls(backbone)
    folder = Path(checkpoint) if checkpoint else default_checkpoint(name)
    if not folder.exists():
        raise CheckpointError(f"method {name!r}: no checkpoint at {folder}")
    return cls.from_checkpoint(backbone, folder)  # type: ignore[attr-defined]
