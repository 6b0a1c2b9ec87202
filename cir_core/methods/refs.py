"""What a method composes from: the references of a batch.

Every method gets the unit image embedding v_r (encoded once per query and shared by all
methods). Some need more of the image: the zero-shot peers' released φ reads the *raw* CLIP
feature f_I(x), whose norm varies per image, so the raw norm ‖f_I(x)‖ travels with v_r wherever
it is known (the embedding cache, prebuilt index folders and uploads record it). A method that
reads the reference itself (a captioner's, CIReVL's) finds, when the caller has them, its
gallery row, its image and a caption of it; every field is batch-aligned with `emb`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np

from cir_core.errors import InputError


@dataclass(frozen=True)
class Refs:
    """A batch of B references: `emb` (B, D) unit rows; `norms` (B,) the raw image-feature norms
    (NaN where unknown) or None when nothing recorded them. Optional, each None or B long:
    `rows` the gallery row of each reference (-1: not a gallery item, e.g. an upload), `images`
    the reference images (PIL images; None where not at hand), `captions` a caption of each
    (None where there is none)."""

    emb: np.ndarray
    norms: np.ndarray | None = None
    rows: np.ndarray | None = None
    images: Sequence[Any] | None = None
    captions: Sequence[str | None] | None = None

    def __post_init__(self) -> None:
        if self.norms is not None and np.shape(self.norms) != (len(self),):
            raise InputError(f"{len(self)} references but raw norms of shape {np.shape(self.norms)}")
        for name in ("rows", "images", "captions"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self):
                raise InputError(f"{len(self)} references but {len(value)} {name}")
        if self.rows is not None:
            object.__setattr__(self, "rows", np.asarray(self.rows, dtype=np.int64))
        for name in ("images", "captions"):  # tuples: a frozen batch, sliced by `take`
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def __len__(self) -> int:
        return 1 if np.ndim(self.emb) == 1 else len(self.emb)

    def take(self, rows: np.ndarray | slice) -> "Refs":
        """The references at `rows` (indices, a boolean mask or a slice), every field alongside."""
        at = np.arange(len(self))[rows]
        pick = lambda v: None if v is None else tuple(v[i] for i in at)  # noqa: E731
        emb = np.atleast_2d(self.emb)  # one reference may be given as a (D,) row
        return Refs(emb[at], None if self.norms is None else self.norms[at],
                    None if self.rows is None else self.rows[at], pick(self.images), pick(self.captions))

    def repeat(self, counts: np.ndarray | int) -> "Refs":
        """Each reference repeated `counts` times (np.repeat along the batch), every field alongside."""
        return self.take(np.repeat(np.arange(len(self)), counts))

    def raw(self, who: str) -> np.ndarray:
        """(B, D) raw image features v_r · ‖f_I(x)‖; InputError naming `who` when a norm is unknown."""
        if self.norms is None or not np.isfinite(self.norms).all():
            raise InputError(
                f"{who} reads the raw image feature (as its authors' code does), but the raw norm of "
                "this reference was not recorded: re-embed the gallery with this version (embedding "
                "caches and index folders written before it hold only unit vectors)")
        return self.emb * self.norms[:, None].astype(self.emb.dtype)


RefInput = Union[np.ndarray, Refs]


def as_refs(ref: RefInput, dim: int, who: str, backbone_id: str) -> Refs:
    """`ref` as float32 `Refs` of width `dim`: an array (B, D) or (D,) means unit embeddings with no
    recorded norms; InputError naming `who` for a wrong shape."""
    refs = ref if isinstance(ref, Refs) else Refs(np.asarray(ref))
    emb = np.asarray(refs.emb, dtype=np.float32)
    norms = refs.norms
    if emb.ndim == 1:
        emb, norms = emb[None], None if norms is None else np.reshape(norms, (1,))
    if emb.ndim != 2 or emb.shape[1] != dim:
        raise InputError(f"{who}: reference embedding has shape {emb.shape}, expected "
                         f"(B, {dim}) for backbone {backbone_id}")
    return Refs(emb, None if norms is None else np.asarray(norms, dtype=np.float32), refs.rows,
                refs.images, refs.captions)
