"""The interface every composition method implements, and the registry that names them.

A method turns (reference embedding v_r, edit text) into a query q in the gallery's embedding
space. It also gives q_∅ (its query for the same reference with an empty edit; Chord scores
the change q − q_∅) and a per-sentence progression q_1..q_n. Methods receive the reference
*embedding* (`Refs`: the unit v_r and, where recorded, its raw feature norm), never the image:
the reference is encoded once per query and shared by all methods.
"""
from __future__ import annotations

import json
import logging
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from cir_core.backbone_id import activation
from cir_core.errors import CheckpointError, InputError
from cir_core.search.scoring import DEFAULT_LAMBDA

from .refs import RefInput, Refs, as_refs

_REGISTRY: dict[str, type["Method"]] = {}
APP_ROLES = ("column", "baseline", "optional")


def register_method(cls: type["Method"]) -> type["Method"]:
    """Class decorator: make `cls` available by `cls.name` (timm's `@register_model`). The
    registration order is the order of the app's columns and of the evaluation tables."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"method name {cls.name!r} registered twice")
    if cls.app_role not in APP_ROLES:
        raise ValueError(f"{cls.__name__}.app_role must be one of {APP_ROLES}, got {cls.app_role!r}")
    _REGISTRY[cls.name] = cls
    return cls


def unregister_method(name: str) -> None:
    """Remove a method registered at run time (a test's or a plugin's)."""
    _REGISTRY.pop(name, None)


def list_methods() -> list[str]:
    """Registered method names, baselines first, in registration order. (Importing this module
    imports its package first, whose __init__ registers the built-in methods.)"""
    return list(_REGISTRY)


def get_method_class(name: str) -> type["Method"]:
    list_methods()
    if name not in _REGISTRY:
        raise InputError(f"unknown method {name!r}; registered: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def method_label(name: str) -> str:
    """The method's display label (its name when it is not registered)."""
    list_methods()
    cls = _REGISTRY.get(name)
    return cls.label if cls is not None and cls.label else name


def default_columns() -> list[str]:
    """The app's default result columns: every method whose `app_role` is "column"."""
    return [n for n in list_methods() if _REGISTRY[n].app_role == "column"]


def optional_methods() -> list[str]:
    """Methods the app offers but does not show by default: every one whose `app_role` is
    "optional" (the zero-shot peers, the other baselines), in registration order."""
    return [n for n in list_methods() if _REGISTRY[n].app_role == "optional"]


def split_baseline(names: list[str]) -> tuple[list[str], str | None]:
    """(the result columns, the baseline among `names` or None): the baseline is the first name
    registered with app_role "baseline"; it is shown last, unticked in figures, left out of pooling."""
    list_methods()
    base = next((n for n in names if n in _REGISTRY and _REGISTRY[n].app_role == "baseline"), None)
    return [n for n in names if n != base], base


def default_baseline() -> str | None:
    """The baseline shown after the columns (the first method whose `app_role` is "baseline")."""
    return next((n for n in list_methods() if _REGISTRY[n].app_role == "baseline"), None)


def shown_methods(chosen: Sequence[str] | None = None) -> list[str]:
    """The methods shown side by side: `chosen` (a user's `--methods`), else every method with
    app_role "column" (registration order), then the "baseline" one."""
    if chosen is not None:
        return list(chosen)
    base = default_baseline()
    return default_columns() + ([base] if base else [])


def extra_methods(chosen: Sequence[str] | None = None) -> list[str]:
    """Methods with app_role "optional" that `shown_methods(chosen)` leaves out: offered as extra
    columns, off by default."""
    shown = set(shown_methods(chosen))
    return [n for n in optional_methods() if n not in shown]


def normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class Method(ABC):
    """A registered composition method. The class attributes describe it to the rest of the
    workbench, so adding a method touches no other file: `label` (shown in the app, the figures
    and the tables), `app_role` ("column": one of the app's default result columns; "baseline":
    the reference column after them; "optional": offered but not shown by default),
    `native_progression` (its per-sentence queries are its own step states, not re-compositions
    of each prefix), `needs_checkpoint`, and `config_cls` (the typed architecture dataclass that
    its network, its checkpoint's config.json and its trainer share)."""

    name: ClassVar[str]
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    app_role: ClassVar[str] = "optional"
    needs_checkpoint: ClassVar[bool] = False
    native_progression: ClassVar[bool] = False
    config_cls: ClassVar[type | None] = None
    # the text protocol its authors' evaluation code uses on a benchmark, where it has its own
    # (read under `--protocol authors`; e.g. {"fashioniq": "pic2word"})
    authors_protocols: ClassVar[dict[str, str]] = {}

    def __init__(self, backbone: Any, config: dict | None = None):
        self.backbone = backbone
        self.config = dict(config or {})
        self.chord_lambda = float(self.config.get("chord_lambda", DEFAULT_LAMBDA))

    # -- what a method implements -------------------------------------------------------------
    @abstractmethod
    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        """B references (`refs.emb`: (B, D) unit rows) + B texts → (B, D) queries (not necessarily
        normalised)."""

    # -- the public interface -----------------------------------------------------------------
    # `ref` is a `Refs` or an array of unit embeddings ((B, D), or (D,) for one reference).
    def compose(self, ref: RefInput, texts: Sequence[str]) -> np.ndarray:
        """Composed queries, (B, D) float32, L2-normalised."""
        refs = self._check_ref(ref)
        texts = list(texts)
        if len(texts) != len(refs):
            raise InputError(f"{len(refs)} references but {len(texts)} edit texts")
        if not len(refs):
            return np.zeros((0, self.backbone.dim), np.float32)
        return normalise(self._compose(refs, texts))

    def compose_empty(self, ref: RefInput) -> np.ndarray:
        """q_∅: the query for each reference with an empty edit (Chord's anchor)."""
        refs = self._check_ref(ref)
        return self.compose(refs, [""] * len(refs))

    def compose_pair(self, ref: RefInput, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(q, q_∅), each (1, D), for one reference and one edit: what a request needs when q_∅ is
        not cached yet. Methods whose two queries can share one forward override it."""
        return self.compose(ref, [text]), self.compose_empty(ref)

    def compose_with_steps(self, ref: RefInput, text: str,
                           sentences: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """(q (1, D), the progression's step queries) for one reference: the request's query and
        its progression. Methods whose q is their last step state override it to compute once."""
        return self.compose(ref, [text]), self.progression(ref, sentences)

    def progression(self, ref: RefInput, sentences: Sequence[str]) -> list[np.ndarray]:
        """Queries after sentence 1, 1–2, …, 1–n for one reference (D,): a list of (D,) arrays.
        The default recomposes each prefix; methods with step state (`native_progression`)
        override it with their own states."""
        return self.prefix_queries(ref, sentences)

    def prefix_queries(self, ref: RefInput, sentences: Sequence[str]) -> list[np.ndarray]:
        """The query of each prefix: sentences 1..k composed from scratch, k = 1..n — what every
        method would answer if it had been given only those sentences (comparable across methods)."""
        refs = self._check_ref(ref).take(slice(0, 1))
        prefixes = [" ".join(sentences[:k]) for k in range(1, len(sentences) + 1)]
        if not prefixes:
            return []
        return list(self.compose(refs.repeat(len(prefixes)), prefixes))

    def _check_ref(self, ref: RefInput) -> Refs:
        return as_refs(ref, int(self.backbone.dim), self.name, self.backbone.id)

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


def check_fit(shapes: dict[str, tuple], expected: dict[str, tuple], where: str, what: str) -> None:
    """CheckpointError naming the file (`where`), what it should fit, and the key and both shapes
    of every missing, unexpected or differently shaped tensor (the first three)."""
    problems = [f"key {k} is missing" for k in expected if k not in shapes]
    problems += [f"unexpected key {k}" for k in shapes if k not in expected]
    problems += [f"key {k} has shape {tuple(shapes[k])} but the model needs {tuple(v)}"
                 for k, v in expected.items() if k in shapes and tuple(shapes[k]) != tuple(v)]
    if problems:
        raise CheckpointError(f"{where} does not fit {what} ({len(problems)} mismatches): "
                              + "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else ""))


def read_weights(path: Path, check: Callable[[dict[str, tuple]], None] | None = None) -> dict:
    """The tensors of a checkpoint folder's safetensors file. `check(shapes)` sees every key's
    shape before any tensor is read and raises a CheckpointError for a file that does not fit; any
    other failure (missing, corrupt, truncated) becomes a one-line CheckpointError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path.parent} has no {path.name}")
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            if check is not None:
                check(shapes)
            return {k: f.get_tensor(k) for k in shapes}
    except CheckpointError:
        raise
    except Exception as exc:  # corrupt / truncated file
        raise CheckpointError(f"cannot read {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


WEIGHTS = "model.safetensors"


def write_checkpoint(folder: Path, state: dict, config: dict, name: str) -> None:
    """`model.safetensors` + `config.json` into `folder`, each written then renamed, so a reader
    never sees half a file."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (WEIGHTS + ".tmp")
    save_file(state, str(tmp), metadata={"method": name})
    os.replace(tmp, folder / WEIGHTS)
    (folder / "config.json.tmp").write_text(json.dumps(config, indent=1, default=str))
    os.replace(folder / "config.json.tmp", folder / "config.json")


def checkpoint_config(folder: Path, methods: Sequence[str], backbone: Any, need: dict[str, Any]) -> dict:
    """A checkpoint folder's config, checked before any weight is read: written by one of
    `methods`, and equal to `need` on each key (embedding dimension, token width: CheckpointError
    naming both values) and made under the backbone's activation (QuickGELU or GELU); another
    backbone with the same widths only warns (it runs, but means little)."""
    cfg = read_method_config(folder)
    if cfg.get("method") not in methods:
        raise CheckpointError(f"{folder} holds a {cfg.get('method')!r} checkpoint, not {' or '.join(map(repr, methods))}")
    made, runs = activation(cfg.get("backbone")), activation(backbone.id)
    if made != runs:  # the same weights under another activation: every feature differs
        raise CheckpointError(f"{methods[0]} checkpoint {folder} was made on backbone {cfg.get('backbone')} "
                              f"({made}) but backbone {backbone.id} runs {runs}: retrain or re-convert it "
                              "on this backbone")
    for key, have in need.items():
        if cfg.get(key) != have:
            raise CheckpointError(f"{methods[0]} checkpoint {folder} was made for {key}={cfg.get(key)} "
                                  f"(backbone {cfg.get('backbone')}) but backbone {backbone.id} has {key}={have}")
    if cfg.get("backbone") != backbone.id:
        logging.getLogger(__name__).warning("%s checkpoint %s was trained on backbone %s, loading it on %s",
                                            methods[0], folder, cfg.get("backbone"), backbone.id)
    return cfg
