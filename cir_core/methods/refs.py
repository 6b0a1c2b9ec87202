"""What a method composes from: the references of a batch.

Every method gets the unit image embedding v_r (encoded once per query and shared by all
methods). Some need more of the image: the zero-shot peers' released φ reads the *raw* CLIP
feature f_I(x), whose norm varies per image, so the raw norm ‖f_I(x)‖ travels with v_r wherever
it is known (the embedding cache, prebuilt index folders and uploads record it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from cir_core.errors import InputError


@dataclass(frozen=True)
class Refs:
    """A batch of B references: `emb` (B, D) unit rows; `norms` (B,) the raw image-feature norms
    (NaN where unknown) or None when nothing recorded them."""

    emb: np.ndarray
    norms: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.norms is not None and np.shape(self.norms) != (len(self),):
            raise InputError(f"{len(self)} references but raw norms of shape {np.shape(self.norms)}")

    def __len__(self) -> int:
        return 1 if np.ndim(self.emb) == 1 else len(self.emb)

    def take(self, rows: np.ndarray | slice) -> "Refs":
        """The references at `rows` (indices or a slice), norms alongside."""
        return Refs(self.emb[rows], None if self.norms is None else self.norms[rows])

    def repeat(self, counts: np.ndarray | int) -> "Refs":
        """Each reference repeated `counts` times (np.repeat along the batch)."""
        return Refs(np.repeat(self.emb, counts, 0), None if self.norms is None else np.repeat(self.norms, counts))

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
    return Refs(emb, None if norms is None else np.asarray(norms, dtype=np.float32))
