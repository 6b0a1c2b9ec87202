"""Scoring a gallery against composed queries: cosine and Chord, exact, numpy in / numpy out.
The one scoring path of the project: the app's search stage, every benchmark, and the trainers'
validation call `rank` (or `score_matrix` for a whole score matrix), with a `ScoreOpts` whose
`lam_for` is the one rule for which Chord λ a method gets.

Chord (seed 000): ``s(c) = cos(q, v_c) + lam * cos(d, v_c - v_r)`` with ``d = q - q_empty``
("empty" variant, the default) or ``d = q - v_r`` ("reference" variant). Every vector is treated as
a direction: query-side rows (q, q_empty, v_r) are normalised here, gallery rows are divided by their
norms on the fly, so the gallery is never copied. The second term is not an inner product in v_c
(its denominator is ||v_c - v_r||), so it is expanded over one (N, D) @ (D, 3B) product instead of
materialising (B, N, D) differences.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InputError
from .prefilter import use_filter
from .topk import topk

if TYPE_CHECKING:
    from .index import Index
    from .prefilter import Int8Filter

DEFAULT_LAMBDA = 0.34
# Used when `rank` gets an index but no shortlist size: cosine top-200 holds the Chord top-k in
# practice for k <= 50 while keeping the exact re-score cheap.
DEFAULT_SHORTLIST = 200
# Below this squared distance, 2 - 2cos (float32 dot products, error ~1e-6) keeps under three
# digits, so those few near-duplicates of the reference are recomputed from the vectors in float64.
_NEAR_DIST2 = 1e-3
VARIANTS = ("empty", "reference")
SCORINGS = ("cosine", "chord")
# Exact scoring works in blocks of queries holding at most this many scores (~64 MB in float32),
# so a 123k-image gallery (CIRCO) never materialises a (Q, N) matrix for every query at once.
_BLOCK_ENTRIES = 16_000_000
# Up to this many queries (an interactive request) the cosine product goes through torch's BLAS
# (`_product`); larger batches (an evaluation's blocks) keep numpy's, whose results the published
# tables were computed with, bit for bit.
_MKL_MAX_QUERIES = 64


@dataclass(frozen=True)
class ScoreOpts:
    """How composed queries are scored: cosine or Chord, Chord's λ (None: each method's own,
    chosen on val and stored in its checkpoint), and Chord's direction variant."""

    scoring: str = "cosine"
    lam: float | None = None
    variant: str = "empty"

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise InputError(f"unknown scoring {self.scoring!r}; expected one of {SCORINGS}")
        if self.variant not in VARIANTS:
            raise InputError(f"unknown Chord variant {self.variant!r}; expected one of {VARIANTS}")
        if self.lam is not None and not np.isfinite(float(self.lam)):
            raise InputError(f"Chord λ must be a finite number, got {self.lam!r}")

    def lam_for(self, method: Any) -> float | None:
        """The λ these options give `method`: None under cosine, else the user's λ when one is
        set, else the method's own `chord_lambda` (DEFAULT_LAMBDA for a method without one)."""
        if self.scoring != "chord":
            return None
        if self.lam is not None:
            return float(self.lam)
        return float(getattr(method, "chord_lambda", DEFAULT_LAMBDA))

    def describe(self) -> str:
        """e.g. "cosine", "chord (each method's λ)", "chord (λ=0.34, reference variant)"."""
        if self.scoring == "cosine":
            return "cosine"
        lam = "each method's λ" if self.lam is None else f"λ={self.lam:g}"
        return f"chord ({lam}" + (", reference variant)" if self.variant != "empty" else ")")


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
    return _cosine(_normalise(_rows(q, "query", g.shape[1])), g, gn)


def _cosine(q: np.ndarray, g: np.ndarray, gn: np.ndarray, batch: int | None = None) -> np.ndarray:
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
    """Chord scores (B, N), C-contiguous per query. The direction term is 0 where
    ||v_c - v_r|| < eps or ||d|| < eps.

    `q_empty` and `v_ref` may be a single row shared by all B queries; `q_empty` is unused (may be
    None) for variant "reference". `lam` is one λ or one per query (B,). `norms`: the gallery's
    precomputed `gallery_norms`.
    """
    if variant not in VARIANTS:
        raise InputError(f"unknown Chord variant {variant!r}; expected one of {VARIANTS}")
    g, gn = _gallery(gallery, norms)
    dim = g.shape[1]
    qn = _normalise(_rows(q, "query", dim))
    b = qn.shape[0]
    vr = _broadcast(_normalise(_rows(v_ref, "v_ref", dim)), b, "v_ref")
    if variant == "empty":
        qe = _broadcast(_normalise(_rows(q_empty, "q_empty", dim)), b, "q_empty")
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
    lam_b = np.broadcast_to(np.asarray(lam, np.float32), (b,))[:, None]
    return (gq + lam_b * direction).astype(np.float32, copy=False)


def score_matrix(q: np.ndarray, q_empty: np.ndarray | None, v_ref: np.ndarray | None,
                 gallery: np.ndarray, scoring: str = "cosine", lam: float | np.ndarray | None = None,
                 variant: str = "empty", norms: np.ndarray | None = None) -> np.ndarray:
    """Exact (B, N) scores of B queries against a gallery: cosine, or Chord with `lam` (one λ or
    one per query; None: DEFAULT_LAMBDA)."""
    if scoring == "cosine":
        return cosine_scores(q, gallery, norms)
    if scoring != "chord":
        raise InputError(f"unknown scoring {scoring!r}; expected one of {SCORINGS}")
    return chord_scores(q, q_empty, v_ref, gallery, DEFAULT_LAMBDA if lam is None else lam, variant,
                        norms=norms)


@dataclass
class Ranking:
    """What `rank` returns: the top-k per query, best first, and optionally the scores of chosen
    gallery rows (a CIRR subset) from the same exact pass."""

    scores: np.ndarray  # (B, k) float32; -inf where an approximate shortlist ran short
    ids: np.ndarray  # (B, k) int64 gallery rows; -1 where it ran short
    at_cols: np.ndarray | None = None  # (B, S) scores at `cols` (-inf at padding)

    def __iter__(self):  # `scores, ids = rank(...)`
        return iter((self.scores, self.ids))


def rank(
    q: np.ndarray,
    q_empty: np.ndarray | None,
    v_ref: np.ndarray | None,
    gallery: np.ndarray,
    k: int,
    scoring: str = "cosine",
    lam: float | np.ndarray | None = DEFAULT_LAMBDA,
    variant: str = "empty",
    exclude: np.ndarray | None = None,
    index: "Index | None" = None,
    shortlist: int | None = None,
    cols: np.ndarray | None = None,
    norms: np.ndarray | None = None,
    prefilter: "Int8Filter | None" = None,
) -> Ranking:
    """Top-k gallery rows per query (ties to the lower row, `topk`).

    Exact over the whole gallery by default, in blocks of queries. With `index` (built over the
    same gallery), a top-`shortlist` (default DEFAULT_SHORTLIST, at least k) by cosine is drawn
    for all queries at once (`shortlist_rows`), plus one for the reference, and re-scored exactly.
    `q_empty`, `v_ref` and `lam` take one row / value per query or one shared by all. `exclude`
    (B,) holds each query's reference row to drop (-1: none). `k` is clipped to the rankable rows.
    `cols` (B, S) gallery rows (-1: padding) whose exact scores are returned too (exact path only).
    `norms`: the gallery's precomputed `gallery_norms` (a fixed gallery pays for them once).
    `prefilter`: the gallery's `Int8Filter`; exact cosine search takes it where `use_filter`'s
    calibrated rule says it is faster (same answer: it only narrows which rows are re-scored).
    """
    g = np.asarray(gallery, dtype=np.float32)
    if g.ndim != 2 or g.shape[0] == 0:
        raise InputError(f"gallery must have shape (N, D) with N >= 1, got {g.shape}")
    if scoring not in SCORINGS:
        raise InputError(f"unknown scoring {scoring!r}; expected one of {SCORINGS}")
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    n = g.shape[0]
    qn = _normalise(_rows(q, "query", g.shape[1]))
    b = qn.shape[0]
    exclude = _exclude(exclude, b, n)
    k = min(k, n - 1 if (exclude >= 0).any() else n)
    if k < 1:
        raise InputError("nothing left to rank once the reference is excluded")
    lams = None if scoring == "cosine" else np.broadcast_to(
        np.asarray(DEFAULT_LAMBDA if lam is None else lam, np.float32), (b,))
    gn = _gallery(g, norms)[1]

    def score(rows: np.ndarray | None, qi: slice) -> np.ndarray:
        sub, sub_n = (g, gn) if rows is None else (g[rows], gn[rows])
        if scoring == "cosine":  # without re-checking what rank checked
            return _cosine(qn[qi], sub, sub_n, b)
        return score_matrix(qn[qi], _pick(q_empty, qi, b), _pick(v_ref, qi, b), sub, scoring,
                            lams[qi], variant, sub_n)

    if index is None:
        if shortlist is not None:
            raise InputError("shortlist needs an index to draw it from")
        if prefilter is not None and (prefilter.n, prefilter.dim) != g.shape:
            raise InputError(f"prefilter ({prefilter.n} x {prefilter.dim}) was not built over "
                             f"this gallery ({n} x {g.shape[1]})")
        if prefilter is not None and scoring == "cosine" and cols is None and use_filter(n, b):
            return _rank_filtered(qn, g, gn, k, exclude, prefilter)
        return _rank_exact(score, b, n, k, exclude, cols)
    if cols is not None:
        raise InputError("cols are scored on the exact path only (no index)")
    if index.ntotal != n or index.dim != g.shape[1]:
        raise InputError(
            f"index ({index.ntotal} x {index.dim}) was not built over this gallery ({n} x {g.shape[1]})"
        )
    size = max(int(shortlist or DEFAULT_SHORTLIST), k) + int((exclude >= 0).any())
    cand = shortlist_rows(g, index, qn, min(size, n))
    out = Ranking(np.full((b, k), -np.inf, np.float32), np.full((b, k), -1, np.int64))
    for i in range(b):  # per query: shortlists differ, and B is small in interactive use
        ids = cand[i][cand[i] >= 0]
        row = score(ids, slice(i, i + 1))
        ref = np.nonzero(ids == exclude[i])[0]  # the reference's column, if drawn
        if len(ids) - len(ref) < 1:
            continue
        # dropped by topk, not set to -inf: a short shortlist would rank it among the -inf
        top_s, top_j = topk(row, k, ref[:1] if len(ref) else np.array([-1]), check=False)
        out.scores[i, : top_s.shape[1]], out.ids[i, : top_s.shape[1]] = top_s[0], ids[top_j[0]]
    return out


def _rank_filtered(qn: np.ndarray, g: np.ndarray, gn: np.ndarray, k: int, exclude: np.ndarray,
                   prefilter: "Int8Filter") -> Ranking:
    """Exact cosine top-k over each query's filter candidates (ascending rows, so the top-k's
    ties still go to the lower row; the padding scores -inf and never ranks)."""
    rows, sc = prefilter.search(qn, g, gn, k, exclude)
    col = None
    if (exclude >= 0).any():  # the reference's column among the candidates, if drawn
        ex = rows == exclude[:, None]
        col = np.where(ex.any(1), ex.argmax(1), -1)
    top_s, top_j = topk(sc, k, col, check=False)
    return Ranking(top_s, np.take_along_axis(rows, top_j, 1))


def _rank_exact(score: Any, b: int, n: int, k: int, exclude: np.ndarray,
                cols: np.ndarray | None) -> Ranking:
    if cols is not None:
        cols = np.asarray(cols, np.int64)
        if cols.ndim != 2 or cols.shape[0] != b or (cols >= n).any():
            raise InputError(f"cols must be ({b}, S) gallery rows (-1: padding), got {cols.shape}")
    step = max(1, _BLOCK_ENTRIES // n)
    scores, ids, at_cols = [], [], []
    for s in range(0, b, step):
        sl = slice(s, s + step)
        sc = score(None, sl)
        top_s, top_i = topk(sc, k, exclude[sl], check=False)  # `rank` checked `exclude`
        scores.append(top_s.astype(np.float32, copy=False))
        ids.append(top_i)
        if cols is not None:
            c = cols[sl]
            at_cols.append(np.where(c >= 0, np.take_along_axis(sc, np.maximum(c, 0), 1), -np.inf))
    if len(scores) == 1 and cols is None:  # one block: nothing to join
        return Ranking(scores[0], ids[0])
    return Ranking(np.concatenate(scores), np.concatenate(ids),
                   np.concatenate(at_cols).astype(np.float32) if cols is not None else None)


def shortlist_rows(gallery: np.ndarray, index: "Index", q: np.ndarray, size: int) -> np.ndarray:
    """(B, size) rows of `gallery` (indexed by `index`) with the highest cosine to each unit
    query row, unordered (HNSW may pad with -1).

    Exact index: one (N, D) @ (D, B) product, i.e. a single pass over the gallery for every
    query of a request. FAISS's flat search would scan it once per query at these batch sizes (it
    switches to BLAS only from `distance_compute_blas_threshold` queries). Approximate: its search."""
    if index.kind != "flat":
        return index.search(q, size)[1]
    sims = q @ gallery.T  # (B, N): rows contiguous for the partition (~4x faster)
    n = sims.shape[1]
    if size >= n:
        return np.broadcast_to(np.arange(n), sims.shape).copy()
    return np.argpartition(sims, n - size, axis=1)[:, n - size:]  # no negated copy


def _exclude(exclude: np.ndarray | None, b: int, n: int) -> np.ndarray:
    if exclude is None:
        return np.full(b, -1, np.int64)
    exclude = np.asarray(exclude, dtype=np.int64).reshape(-1)
    if exclude.shape == (1,) and b > 1:
        exclude = np.repeat(exclude, b)
    if exclude.shape != (b,):
        raise InputError(f"exclude must have shape ({b},), got {exclude.shape}")
    if ((exclude < -1) | (exclude >= n)).any():
        raise InputError(f"exclude holds an index outside [-1, {n})")
    return exclude


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
