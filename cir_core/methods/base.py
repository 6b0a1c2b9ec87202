"""The interface every composition method implements, and the registry that names them.

A method turns (reference embedding v_r, edit text) into a query q in the gallery's embedding
space. It also gives q_∅ (its query for the same reference with an empty edit; Chord scores
the change q − q_∅) and a per-sentence progression q_1..q_n. Methods receive the reference
*embedding*, never the image: the reference is encoded once per query and shared by all methods.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from cir_core.errors import CheckpointError, InputError
from cir_core.scoring import DEFAULT_LAMBDA

_REGISTRY: dict[str, type["Method"]] = {}


def register_method(cls: type["Method"]) -> type["Method"]:
    """Class decorator: make `cls` available by `cls.name`."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"method name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def list_methods() -> list[str]:
    """Registered method names, baselines first, in registration order."""
    from cir_core import methods  # noqa: F401  (importing the package registers everything)

    return list(_REGISTRY)


def get_method_class(name: str) -> type["Method"]:
    list_methods()
    if name not in _REGISTRY:
        raise InputError(f"unknown method {name!r}; registered: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class Method(ABC):
    name: ClassVar[str]
    description: ClassVar[str] = ""
    needs_checkpoint: ClassVar[bool] = False
    native_progression: ClassVar[bool] = False  # True when q_k is the method's own step state

    def __init__(self, backbone: Any, config: dict | None = None):
        self.backbone = backbone
        self.config = dict(config or {})
        self.chord_lambda = float(self.config.get("chord_lambda", DEFAULT_LAMBDA))

    # -- what a method implements -------------------------------------------------------------
    @abstractmethod
    def _compose(self, ref: np.ndarray, texts: list[str]) -> np.ndarray:
        """(B, D) normalised refs + B texts → (B, D) queries (not necessarily normalised)."""

    # -- the public interface -----------------------------------------------------------------
    def compose(self, ref: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Composed queries, (B, D) float32, L2-normalised."""
        ref = self._check_ref(ref)
        texts = list(texts)
        if len(texts) != len(ref):
            raise InputError(f"{len(ref)} references but {len(texts)} edit texts")
        if not len(ref):
            return np.zeros((0, self.backbone.dim), np.float32)
        return normalise(self._compose(ref, texts))

    def compose_empty(self, ref: np.ndarray) -> np.ndarray:
        """q_∅: the query for each reference with an empty edit (Chord's anchor)."""
        ref = self._check_ref(ref)
        return self.compose(ref, [""] * len(ref))

    def progression(self, ref: np.ndarray, sentences: Sequence[str]) -> list[np.ndarray]:
        """Queries after sentence 1, 1–2, …, 1–n for one reference (D,): a list of (D,) arrays.
        The default recomposes each prefix; methods with step state override it."""
        ref = self._check_ref(ref)[:1]
        prefixes = [" ".join(sentences[:k]) for k in range(1, len(sentences) + 1)]
        if not prefixes:
            return []
        return list(self.compose(np.repeat(ref, len(prefixes), 0), prefixes))

    def _check_ref(self, ref: np.ndarray) -> np.ndarray:
        ref = np.asarray(ref, dtype=np.float32)
        if ref.ndim == 1:
            ref = ref[None]
        if ref.ndim != 2 or ref.shape[1] != self.backbone.dim:
            raise InputError(f"{self.name}: reference embedding has shape {ref.shape}, expected "
                             f"(B, {self.backbone.dim}) for backbone {self.backbone.id}")
        return ref

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, λ={self.chord_lambda})"


def read_method_config(folder: Path) -> dict:
    """`config.json` of a method checkpoint folder, with a clear error when it is missing/bad."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"no method checkpoint at {folder} (config.json missing)")
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None
