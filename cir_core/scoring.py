"""Scoring a gallery against composed queries: cosine and Chord, exact, numpy in / numpy out.

Chord (seed 000): ``s(c) = cos(q, v_c) + lam * cos(d, v_c - v_r)`` with ``d = q - q_empty``
("empty" variant, the default) or ``d = q - v_r`` ("reference" variant). Every vector is treated as
a direction: query-side rows (q, q_empty, v_r) are normalised here, gallery rows are divided by their
norms on the fly, so the gallery is never copied. The second term is not an inner product in v_c
(its denominator is ||v_c - v_r||), so it is expanded over one (N, D) @ (D, 3B) product instead of
materialising (B, N, D) differences.
"""
from __future__ import annotations

import numpy as np

from .errors import InputError
from .index import Index

DEFAULT_LAMBDA = 0.34
# Used when `rank` gets an index but no shortlist size: cosine top-200 holds the Chord top-k in
# practice for k <= 50 while keeping the exact re-score cheap.
DEFAULT_SHORTLIST = 200
# Below this squared distance, 2 - 2cos (float32 dot products, error ~1e-6) keeps under three
# digits, so those few near-duplicates of the reference are recomputed from the vectors in float64.
_NEAR_DIST2 = 1e-3
VARIANTS = ("empty", "reference")
SCORINGS = ("cosine", "chord")


def _rows(x: np.ndarray | None, name: str, dim: int | None = None) -> np.ndarray:
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


def _normalise(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    if (n < 1e-12).any():
        raise InputError("a query-side embedding has zero norm")
    return x / n


def _broadcast(x: np.ndarray, b: int, name: str) -> np.ndarray:
    """One row serves every query (e.g. several methods' queries for the same reference)."""
    if x.shape[0] == b:
        return x
    if x.shape[0] == 1:
        return np.repeat(x, b, axis=0)
    raise InputError(f"{name} has {x.shape[0]} rows but the query has {b}")


def _gallery(gallery: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(gallery, dtype=np.float32)
    if g.ndim != 2 or g.shape[0] == 0:
        raise InputError(f"gallery must have shape (N, D) with N >= 1, got {g.shape}")
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    return g, np.maximum(norms, 1e-12)


def cosine_scores(q: np.ndarray, gallery: np.ndarray) -> np.ndarray:
    """Cosine similarity (B, N) between query rows and gallery rows (neither assumed unit norm)."""
    g, gn = _gallery(gallery)
    qn = _normalise(_rows(q, "query", g.shape[1]))
    return (g @ qn.T / gn[:, None]).T


def chord_scores(
    q: np.ndarray,
    q_empty: np.ndarray | None,
    v_ref: np.ndarray,
    gallery: np.ndarray,
    lam: float = DEFAULT_LAMBDA,
    variant: str = "empty",
    eps: float = 1e-6,
) -> np.ndarray:
    """Chord scores (B, N). The direction term is 0 where ||v_c - v_r|| < eps or ||d|| < eps.

    `q_empty` and `v_ref` may be a single row shared by all B queries; `q_empty` is unused (may be
    None) for variant "reference".
    """
    if variant not in VARIANTS:
        raise InputError(f"unknown Chord variant {variant!r}; expected one of {VARIANTS}")
    g, gn = _gallery(gallery)
    dim = g.shape[1]
    qn = _normalise(_rows(q, "query", dim))
    b = qn.shape[0]
    vr = _broadcast(_normalise(_rows(v_ref, "v_ref", dim)), b, "v_ref")
    if variant == "empty":
        qe = _broadcast(_normalise(_rows(q_empty, "q_empty", dim)), b, "q_empty")
        cols = np.concatenate([qn, qe, vr])  # (3B, D)
    else:
        cols = np.concatenate([qn, vr])  # G.d only needs G.q and G.v_r here
    prod = g @ cols.T  # (N, 3B) or (N, 2B): the one pass over the gallery
    prod /= gn[:, None]  # rows of the unit-normalised gallery, without copying it
    gq, gr = prod[:, :b], prod[:, -b:]
    d = qn - (qe if variant == "empty" else vr)
    g_d = gq - prod[:, b : 2 * b] if variant == "empty" else gq - gr  # v_c . d
    num = g_d - np.einsum("bd,bd->b", vr, d)[None, :]  # (v_c - v_r) . d
    dist2 = np.maximum(2.0 - 2.0 * gr, 0.0)  # ||v_c - v_r||^2 with unit rows
    dnorm = np.linalg.norm(d, axis=1)  # (B,)

    rows, qs = np.nonzero(dist2 < _NEAR_DIST2)
    for c in range(0, rows.size, 4096):  # chunked: a gallery of near-duplicates stays bounded
        r, qi = rows[c : c + 4096], qs[c : c + 4096]
        diff = g[r].astype(np.float64) / gn[r, None] - vr[qi].astype(np.float64)
        dist2[r, qi] = np.einsum("nd,nd->n", diff, diff)
        num[r, qi] = np.einsum("nd,nd->n", diff, d[qi].astype(np.float64))

    dist = np.sqrt(dist2)
    ok = (dist >= eps) & (dnorm >= eps)[None, :]
    direction = np.zeros_like(num)
    np.divide(num, dist * dnorm[None, :], out=direction, where=ok)
    return (gq + np.float32(lam) * direction).T.astype(np.float32, copy=False)


def _topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best-first top-k per row: argpartition (O(N)) then sort only the k survivors."""
    m = scores.shape[1]
    k = min(k, m)
    if k < m:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(m), scores.shape)
    part_scores = np.take_along_axis(scores, part, 1)
    order = np.argsort(-part_scores, axis=1, kind="stable")
    return np.take_along_axis(part_scores, order, 1), np.take_along_axis(part, order, 1)


def rank(
    q: np.ndarray,
    q_empty: np.ndarray | None,
    v_ref: np.ndarray | None,
    gallery: np.ndarray,
    k: int,
    scoring: str = "cosine",
    lam: float = DEFAULT_LAMBDA,
    variant: str = "empty",
    exclude: np.ndarray | None = None,
    index: Index | None = None,
    shortlist: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k gallery rows per query: (scores (B, k) float32, ids (B, k) int64), best first.

    Exact over the whole gallery by default. With `index` (built over the same gallery), the
    top-`shortlist` (default DEFAULT_SHORTLIST, at least k) by cosine come from FAISS, plus one
    for the reference, and are re-scored exactly on that shortlist. `exclude` (B,) holds each
    query's reference row to drop (-1: none). `k` is clipped to the number of rankable rows (N, or
    N - 1 when some row is excluded). An HNSW index that reaches fewer than k items leaves id -1
    with score -inf in the tail.
    """
    if scoring not in SCORINGS:
        raise InputError(f"unknown scoring {scoring!r}; expected one of {SCORINGS}")
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    g = np.asarray(gallery, dtype=np.float32)
    if g.ndim != 2 or g.shape[0] == 0:
        raise InputError(f"gallery must have shape (N, D) with N >= 1, got {g.shape}")
    n = g.shape[0]
    qn = _normalise(_rows(q, "query", g.shape[1]))
    b = qn.shape[0]
    if exclude is None:
        exclude = np.full(b, -1, np.int64)
    exclude = np.asarray(exclude, dtype=np.int64).reshape(-1)
    if exclude.shape != (b,):
        raise InputError(f"exclude must have shape ({b},), got {exclude.shape}")
    if ((exclude < -1) | (exclude >= n)).any():
        raise InputError(f"exclude holds an index outside [-1, {n})")
    k = min(k, n - 1 if (exclude >= 0).any() else n)
    if k < 1:
        raise InputError("nothing left to rank once the reference is excluded")

    def score(rows: np.ndarray | None, qi: slice) -> np.ndarray:
        sub = g if rows is None else g[rows]
        if scoring == "cosine":
            return cosine_scores(qn[qi], sub)
        qe = None if q_empty is None else _pick(q_empty, qi, b)
        return chord_scores(qn[qi], qe, _pick(v_ref, qi, b), sub, lam, variant)

    if index is None:
        if shortlist is not None:
            raise InputError("shortlist needs an index to draw it from")
        scores = score(None, slice(None))
        valid = exclude >= 0
        scores[np.nonzero(valid)[0], exclude[valid]] = -np.inf
        top_s, top_i = _topk(scores, k)
        return top_s.astype(np.float32, copy=False), top_i.astype(np.int64, copy=False)

    if index.ntotal != n or index.dim != g.shape[1]:
        raise InputError(
            f"index ({index.ntotal} x {index.dim}) was not built over this gallery ({n} x {g.shape[1]})"
        )
    s = max(int(shortlist or DEFAULT_SHORTLIST), k) + int((exclude >= 0).any())
    _, cand = index.search(qn, s)  # (B, S); HNSW may pad with -1
    out_s = np.full((b, k), -np.inf, np.float32)
    out_i = np.full((b, k), -1, np.int64)
    for i in range(b):  # per query: shortlists differ, and B is small in interactive use
        ids = cand[i][cand[i] >= 0]
        row = score(ids, slice(i, i + 1))
        row[0, ids == exclude[i]] = -np.inf
        top_s, top_j = _topk(row, k)
        out_s[i, : top_s.shape[1]], out_i[i, : top_s.shape[1]] = top_s[0], ids[top_j[0]]
    return out_s, out_i


def _pick(x: np.ndarray | None, qi: slice, b: int) -> np.ndarray | None:
    """Rows `qi` of a per-query array, or the single shared row."""
    if x is None:
        return None
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1 or x.shape[0] == 1:
        return x
    if x.shape[0] != b:
        raise InputError(f"expected {b} rows (one per query) or 1, got {x.shape[0]}")
    return x[qi]
