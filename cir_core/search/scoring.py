"""Scores of composed queries against gallery rows: cosine and Chord, exact, numpy in / numpy out
(`score_matrix`), and `ScoreOpts`, how queries are scored (its `lam_for` is the one rule for which
Chord λ a method gets). Ranking a gallery is `cir_core.search.searcher.rank`.

Chord (seed 000): ``s(c) = cos(q, v_c) + lam * cos(d, v_c - v_r)`` with ``d = q - q_empty``
("empty" variant, the default) or ``d = q - v_r`` ("reference" variant). Every vector is treated as
a direction: query-side rows (q, q_empty, v_r) are normalised here, gallery rows are divided by their
norms on the fly, so the gallery is never copied. The second term is not an inner product in v_c
(its denominator is ||v_c - v_r||), so it is expanded over one (N, D) @ (D, 3B) product instead of
materialising (B, N, D) differences.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ..errors import InputError

DEFAULT_LAMBDA = 0.34
# Below this squared distance, 2 - 2cos (float32 dot products, error ~1e-6) keeps under three
# digits, so those few near-duplicates of the reference are recomputed from the vectors in float64.
_NEAR_DIST2 = 1e-3
VARIANTS = ("empty", "reference")
SCORINGS = ("cosine", "chord")
# Up to this many queries (an interactive request) the cosine product goes through torch's BLAS
# (`_product`); larger batches (an evaluation's blocks) keep numpy's, whose results the published
# tables were computed with, bit for bit.
_MKL_MAX_QUERIES = 64


@dataclass(frozen=True)
class ScoreOpts:
    """How composed queries are scored: cosine or Chord, Chord's λ and its direction variant.

    `lam` None means each method's own λ (chosen on val, stored in its checkpoint): resolve it
    with `for_method` (one method) or `per_query` (a batch mixing methods) before scoring, which
    needs a concrete λ under Chord: one for every query, or one per query (a tuple)."""

    scoring: str = "cosine"
    lam: float | tuple[float, ...] | None = None
    variant: str = "empty"

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise InputError(f"unknown scoring {self.scoring!r}; expected one of {SCORINGS}")
        if self.variant not in VARIANTS:
            raise InputError(f"unknown Chord variant {self.variant!r}; expected one of {VARIANTS}")
        lams = self.lam if isinstance(self.lam, tuple) else () if self.lam is None else (self.lam,)
        if not all(np.isfinite(float(x)) for x in lams):
            raise InputError(f"Chord λ must be a finite number, got {self.lam!r}")

    def lam_for(self, method: Any) -> float | None:
        """The λ these options give `method`: None under cosine, else the user's λ when one is
        set, else the method's own `chord_lambda` (DEFAULT_LAMBDA for a method without one)."""
        if self.scoring != "chord":
            return None
        if isinstance(self.lam, tuple):
            raise InputError("per-query λs belong to a batch, not to one method")
        if self.lam is not None:
            return float(self.lam)
        return float(getattr(method, "chord_lambda", DEFAULT_LAMBDA))

    def for_method(self, method: Any) -> "ScoreOpts":
        """These options with `method`'s λ resolved (`lam_for`)."""
        return replace(self, lam=self.lam_for(method))

    def per_query(self, lams: Sequence[float]) -> "ScoreOpts":
        """These options with one resolved λ per query (Chord; cosine ignores them)."""
        return replace(self, lam=tuple(float(x) for x in lams)) if self.scoring == "chord" else self

    def lams(self, b: int) -> np.ndarray | None:
        """(b,) float32 λ per query under Chord (None under cosine); InputError when unresolved."""
        if self.scoring != "chord":
            return None
        if self.lam is None:
            raise InputError("Chord needs a resolved λ: ScoreOpts.for_method(method) or .per_query(lams)")
        lam = np.asarray(self.lam, np.float32)
        if lam.ndim == 1 and lam.shape != (b,):
            raise InputError(f"{lam.shape[0]} λs for {b} queries")
        return np.broadcast_to(lam, (b,))

    def describe(self) -> str:
        """e.g. "cosine", "chord (each method's λ)", "chord (λ=0.34, reference variant)"."""
        if self.scoring == "cosine":
            return "cosine"
        lam = ("each method's λ" if self.lam is None else "per-query λ" if isinstance(self.lam, tuple)
               else f"λ={self.lam:g}")
        return f"chord ({lam}" + (", reference variant)" if self.variant != "empty" else ")")


@dataclass(frozen=True)
class Queries:
    """Composed queries and what Chord scores them with: `q` (B, D); `q_empty`, each query's
    method's query for an empty edit, and `v_ref`, its reference, each (B, D) or one row shared by
    all (Chord's "empty" variant reads both, "reference" `v_ref` only, cosine neither)."""

    q: np.ndarray
    q_empty: np.ndarray | None = None
    v_ref: np.ndarray | None = None


def as_rows(x: np.ndarray | None, name: str, dim: int | None = None) -> np.ndarray:
    """`x` as a checked float32 (B, D) batch (one row for (D,)); InputError naming `name`."""
    if x is None:
        raise InputError(f"{name} is required")
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[0] == 0:
        raise InputError(f"{name} must have shape (B, D) or (D,), got {x.shape}")
    if dim is not None and x.shape[1] != dim:
        raise InputError(f"{name} dim {x.shape[1]} != gallery dim {dim}")
    if not np.isfinite(x).all():
        raise InputError(f"{name} contains NaN or inf")
    return x


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Checked rows scaled to unit norm; InputError for a zero row."""
    # np.linalg.norm(x, axis=1)'s own arithmetic for real rows, without its ~6 us of dispatch
    n = np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True))
    if n.min() < 1e-12:
        raise InputError("a query-side embedding has zero norm")
    return x / n


def _broadcast(x: np.ndarray, b: int, name: str) -> np.ndarray:
    """One row serves every query (e.g. several methods' queries for the same reference)."""
    if x.shape[0] == b:
        return x
    if x.shape[0] == 1:
        return np.repeat(x, b, axis=0)
    raise InputError(f"{name} has {x.shape[0]} rows but the query has {b}")


def gallery_norms(gallery: np.ndarray) -> np.ndarray:
    """The rows' norms (N,), floored at 1e-12: compute once for a fixed gallery and pass them to
    the scoring functions (`norms=`) to skip a pass over the gallery per request."""
    g = np.asarray(gallery, dtype=np.float32)
    return np.maximum(np.sqrt(np.einsum("ij,ij->i", g, g)), 1e-12)


def _gallery(gallery: np.ndarray, norms: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(gallery, dtype=np.float32)
    if g.ndim != 2 or g.shape[0] == 0:
        raise InputError(f"gallery must have shape (N, D) with N >= 1, got {g.shape}")
    if norms is None:
        return g, gallery_norms(g)
    norms = np.asarray(norms, np.float32)
    if norms.shape != (g.shape[0],):
        raise InputError(f"norms must have shape ({g.shape[0]},), got {norms.shape}")
    return g, norms


def cosine_scores(q: np.ndarray, gallery: np.ndarray, norms: np.ndarray | None = None) -> np.ndarray:
    """Cosine similarity (B, N) between query rows and gallery rows (neither assumed unit norm),
    C-contiguous per query. `norms`: the gallery's precomputed `gallery_norms`."""
    g, gn = _gallery(gallery, norms)
    return cosine_unit(unit_rows(as_rows(q, "query", g.shape[1])), g, gn)


def cosine_unit(q: np.ndarray, g: np.ndarray, gn: np.ndarray, batch: int | None = None) -> np.ndarray:
    """`cosine_scores`' arithmetic on checked inputs: unit float32 query rows, the gallery and its
    norms. `batch`: the whole request's query count when `q` is one block of it (the product's
    BLAS is chosen by the request, so an evaluation's last short block scores like the others)."""
    b = len(q) if batch is None else batch
    scores = _product(q, g) if 1 < len(q) and b <= _MKL_MAX_QUERIES else q @ g.T
    scores /= gn[None, :]  # in place: no second (B, N) array
    return scores


def _product(q: np.ndarray, g: np.ndarray) -> np.ndarray:
    """(B, N) = q @ g.T through torch's BLAS (MKL), for a few queries: numpy's OpenBLAS runs
    this skinny product 1.4-3.5x slower (10k x 512, 7-16 queries, measured 2026-12-01). As
    g @ q.T, then one transposing copy, so each query's scores are contiguous for the top-k."""
    import torch

    with torch.no_grad():
        return (torch.from_numpy(g) @ torch.from_numpy(q).T).T.contiguous().numpy()


def chord_scores(
    q: np.ndarray,
    q_empty: np.ndarray | None,
    v_ref: np.ndarray,
    gallery: np.ndarray,
    lam: float | np.ndarray = DEFAULT_LAMBDA,
    variant: str = "empty",
    eps: float = 1e-6,
    norms: np.ndarray | None = None,
) -> np.ndarray:
    """Chord scores (B, N), C-contiguous per query: `chord_terms`' cosine + λ · direction.

    `q_empty` and `v_ref` may be a single row shared by all B queries; `q_empty` is unused (may be
    None) for variant "reference". `lam` is one λ or one per query (B,). `norms`: the gallery's
    precomputed `gallery_norms`.
    """
    gq, direction = chord_terms(q, q_empty, v_ref, gallery, variant, eps, norms)
    lam_b = np.broadcast_to(np.asarray(lam, np.float32), (gq.shape[0],))[:, None]
    return (gq + lam_b * direction).astype(np.float32, copy=False)


def chord_terms(
    q: np.ndarray,
    q_empty: np.ndarray | None,
    v_ref: np.ndarray,
    gallery: np.ndarray,
    variant: str = "empty",
    eps: float = 1e-6,
    norms: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Chord's two terms, each (B, N): the cosine cos(q, v_c) and the direction cos(d, v_c - v_r)
    (d = q - q_empty, or q - v_r for variant "reference"), which is 0 where ||v_c - v_r|| < eps
    or ||d|| < eps. What a result's score is made of (the app's "why this result")."""
    if variant not in VARIANTS:
        raise InputError(f"unknown Chord variant {variant!r}; expected one of {VARIANTS}")
    g, gn = _gallery(gallery, norms)
    dim = g.shape[1]
    qn = unit_rows(as_rows(q, "query", dim))
    b = qn.shape[0]
    vr = _broadcast(unit_rows(as_rows(v_ref, "v_ref", dim)), b, "v_ref")
    if variant == "empty":
        qe = _broadcast(unit_rows(as_rows(q_empty, "q_empty", dim)), b, "q_empty")
        cols = np.concatenate([qn, qe, vr])  # (3B, D)
    else:
        cols = np.concatenate([qn, vr])  # G.d only needs G.q and G.v_r here
    prod = cols @ g.T  # (3B, N) or (2B, N): the one pass over the gallery
    prod /= gn[None, :]  # columns of the unit-normalised gallery, without copying it
    gq, gr = prod[:b], prod[-b:]
    d = qn - (qe if variant == "empty" else vr)
    g_d = gq - prod[b : 2 * b] if variant == "empty" else gq - gr  # v_c . d
    num = g_d - np.einsum("bd,bd->b", vr, d)[:, None]  # (v_c - v_r) . d
    dist2 = np.maximum(2.0 - 2.0 * gr, 0.0)  # ||v_c - v_r||^2 with unit rows
    dnorm = np.linalg.norm(d, axis=1)  # (B,)

    qs, rows = np.nonzero(dist2 < _NEAR_DIST2)
    for c in range(0, rows.size, 4096):  # chunked: a gallery of near-duplicates stays bounded
        r, qi = rows[c : c + 4096], qs[c : c + 4096]
        diff = g[r].astype(np.float64) / gn[r, None] - vr[qi].astype(np.float64)
        dist2[qi, r] = np.einsum("nd,nd->n", diff, diff)
        num[qi, r] = np.einsum("nd,nd->n", diff, d[qi].astype(np.float64))

    dist = np.sqrt(dist2)
    ok = (dist >= eps) & (dnorm >= eps)[:, None]
    direction = np.zeros_like(num)
    np.divide(num, dist * dnorm[:, None], out=direction, where=ok)
    return gq, direction


def score_matrix(queries: Queries, gallery: np.ndarray, opts: ScoreOpts,
                 norms: np.ndarray | None = None) -> np.ndarray:
    """Exact (B, N) scores of the queries against a gallery under `opts` (Chord: a resolved λ,
    one or one per query). `norms`: the gallery's precomputed `gallery_norms`."""
    if opts.scoring == "cosine":
        return cosine_scores(queries.q, gallery, norms)
    lams = opts.lams(len(as_rows(queries.q, "query")))
    assert lams is not None  # Chord's options give one λ per query (`lams` raises when unresolved)
    if queries.v_ref is None:
        raise InputError("Chord scores need the queries' reference (v_ref)")
    return chord_scores(queries.q, queries.q_empty, queries.v_ref, gallery, lams, opts.variant, norms=norms)
