"""The interface every composition method implements, and the registry that names them.

A method turns (reference embedding v_r, edit text) into a query q in the gallery's embedding
space. It also gives q_∅ (its query for the same reference with an empty edit; Chord scores
the change q − q_∅) and a per-sentence progression q_1..q_n. Methods receive the reference
*embedding* (`Refs`: the unit v_r and, where recorded, its raw feature norm), never the image:
the reference is encoded once per query and shared by all methods.

A trained method saves and loads itself through `cir_core.checkpoint` (`save` /
`from_checkpoint`, written once here): a family supplies only the module its weights are
(`weights()`), what a checkpoint must match on the backbone (`checkpoint_needs`) and its own
extra description (`checkpoint_extra`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence, TypeVar

import numpy as np

from cir_core.checkpoint import Checkpoint, load_checkpoint, load_weights, save_checkpoint, shapes_of
from cir_core.config import DictConfig, git_commit
from cir_core.errors import CheckpointError, InputError
from cir_core.search.scoring import DEFAULT_LAMBDA

from ..encoder import Encoder
from .refs import RefInput, Refs, as_refs

if TYPE_CHECKING:
    from torch import nn

_REGISTRY: dict[str, type["Method"]] = {}
M = TypeVar("M", bound="Method")
APP_ROLES = ("column", "baseline", "optional")


def register_method(cls: type["Method"]) -> type["Method"]:
    """Class decorator: make `cls` available by `cls.name` (timm's `@register_model`). The app's
    columns and the evaluation tables list methods by their declared `order`, then by
    registration."""
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
    """Registered method names by their declared `order` (baselines first), ties in registration
    order. (Importing this module imports its package first, which registers every method.)"""
    names = list(_REGISTRY)
    return sorted(names, key=lambda n: (_REGISTRY[n].order, names.index(n)))


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
    app_role "column" (in their declared order), then the "baseline" one."""
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
    of each prefix), `needs_checkpoint`, `config_cls` (the typed architecture dataclass that
    its network, its checkpoint's config.json and its trainer share), `order` (where it stands
    among the app's columns and the tables' rows: lower first, ties in registration order) and
    `reads_whole_text` (it encodes the whole edit at once, so a text longer than the text tower's
    context is cut for it: the app's and the eval's text-context notes name it)."""

    name: ClassVar[str]
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    app_role: ClassVar[str] = "optional"
    needs_checkpoint: ClassVar[bool] = False
    native_progression: ClassVar[bool] = False
    config_cls: ClassVar[type[DictConfig] | None] = None
    order: ClassVar[int] = 100  # the built-ins: 0-2 baselines, 10-13 the app's columns, 20+ the peers
    reads_whole_text: ClassVar[bool] = True
    # the methods whose checkpoints load as this one (default: its own name only)
    checkpoint_family: ClassVar[tuple[str, ...]] = ()
    weights_label: ClassVar[str] = "weights"  # what its checkpoint's tensors are, in error messages
    # the text protocol its authors' evaluation code uses on a benchmark, where it has its own
    # (read under `--protocol authors`; e.g. {"fashioniq": "pic2word"})
    authors_protocols: ClassVar[dict[str, str]] = {}

    def __init__(self, backbone: Encoder, config: dict | None = None):
        """`config`: `arch` (fields of `config_cls`) and `chord_lambda`, both optional."""
        self.backbone = backbone
        self.config = dict(config or {})
        lam = self.config.get("chord_lambda")
        self.chord_lambda = float(DEFAULT_LAMBDA if lam is None else lam)
        self.arch: Any = self.config_cls.from_dict(self.config.get("arch", {})) if self.config_cls else None
        self.checkpoint: Checkpoint | None = None  # the description it was loaded from, if any

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

    # -- checkpoints (what a trained family supplies) -----------------------------------------
    def weights(self) -> "nn.Module | None":
        """The module whose state dict is this method's checkpoint (None: nothing trained)."""
        return None

    @classmethod
    def checkpoint_needs(cls, backbone: Encoder) -> dict[str, Any]:
        """What a checkpoint must have been made for on `backbone` (checked before any weight)."""
        return {"embed_dim": backbone.dim}

    def checkpoint_extra(self) -> dict[str, Any]:
        """The method's own entries of its checkpoint's `extra` (e.g. its prompt)."""
        return {}

    # -- checkpoints (written once, for every family) -----------------------------------------
    def save(self, folder: str | Path, metrics: dict | None = None, *, training: dict | None = None,
             lambda_search: dict | None = None, **extra: Any) -> Path:
        """Write `folder` (model.safetensors + config.json, `cir_core.checkpoint`). What is not
        given (metrics, training recipe, λ search, extra) is kept from the checkpoint it was loaded
        from; the rest describes the model as it is now."""
        module = self.weights()
        if module is None:
            raise CheckpointError(f"{self.name} has no trained weights to save")
        old = self.checkpoint or Checkpoint(self.name, None, 0)
        ck = Checkpoint(
            method=self.name, backbone=self.backbone.id, embed_dim=int(self.backbone.dim),
            token_width=self.checkpoint_needs(self.backbone).get("token_width"),
            arch=self.arch.to_dict() if self.arch is not None else {}, chord_lambda=self.chord_lambda,
            lambda_search=old.lambda_search if lambda_search is None else lambda_search,
            lambda_repicked=old.lambda_repicked if lambda_search is None else None,
            metrics=dict(old.metrics if metrics is None else metrics),
            training=dict(old.training if training is None else training), git_commit=git_commit(),
            extra={**old.extra, **self.checkpoint_extra(), **extra})
        state = {k: v.float() if v.is_floating_point() else v for k, v in module.state_dict().items()}
        save_checkpoint(Path(folder), ck, state)
        self.checkpoint = ck
        return Path(folder)

    @classmethod
    def from_checkpoint(cls: type[M], backbone: Encoder, folder: str | Path) -> M:
        """Load a checkpoint folder; CheckpointError (one line) if it is missing, unreadable, for
        another method, another embedding dimension / token width or activation (checked before
        the weights), or its tensors do not fit (file, key and shapes named)."""
        folder = Path(folder)
        ck = load_checkpoint(folder, cls.checkpoint_family or (cls.name,), backbone, cls.checkpoint_needs(backbone))
        method = cls(backbone, {"arch": ck.arch, "chord_lambda": ck.chord_lambda})
        module = method.weights()
        if module is None:
            raise CheckpointError(f"{cls.name} takes no checkpoint ({folder})")
        what = f"{cls.name}'s {cls.weights_label} (arch {method.arch})"
        module.load_state_dict(load_weights(folder, shapes_of(module.state_dict()), what), strict=True)
        method.checkpoint = ck
        return method

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, λ={self.chord_lambda})"

