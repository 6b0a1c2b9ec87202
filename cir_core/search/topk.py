"""The project's one top-k over a score matrix, numpy in / numpy out.

Exact and deterministic: the result equals a full stable sort of each row by descending score,
i.e. ties go to the lower gallery row, also across the k-th place, so a hand-made score matrix
has one right answer and two code paths that score alike rank alike.

Fast: one `argpartition` per row for the best k+1 (the input is never negated or copied), a sort
of those few, and a proof that no tie crosses the cut — the (k+1)-th best is strictly below the
k-th (one more slot absorbs an excluded row when there is one). Only a row where that proof fails (a tie at
the cut) pays for the slower exact selection. A single short row (the int8 filter's candidates) is
sorted whole, which is the definition itself.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

# One row this short is fully sorted: ~10 numpy calls instead of the partition and its proof's
# ~25 (the int8 filter's few hundred candidates; a stable sort of 512 floats takes ~10 us).
_SHORT = 512


def topk(scores: np.ndarray, k: int, exclude: np.ndarray | None = None,
         check: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(scores (Q, k'), rows (Q, k') int64), best first, for a (Q, N) score matrix.

    `exclude` (Q,) holds one row per query that must not appear (-1: none), e.g. the reference.
    k' = min(k, rankable rows). The input is never modified. `check=False` skips the input
    validation (shape, excluded rows) for callers that built the matrix themselves."""
    s = np.asarray(scores)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise InputError(f"scores must be a non-empty (Q, N) array, got shape {s.shape}")
    if s.dtype.kind != "f":  # (not np.issubdtype: ~8 us of a 10k-row search)
        s = s.astype(np.float64)
    q, n = s.shape
    ex = np.full(q, -1, np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64).reshape(-1)
    if check and (ex.shape != (q,) or ((ex < -1) | (ex >= n)).any()):
        raise InputError(f"exclude must be ({q},) rows in [-1, {n}), got {ex.shape}")
    excluding = bool((ex >= 0).any())
    k = min(int(k), n - excluding)
    if k < 1:
        raise InputError("nothing to rank once the reference is excluded")
    if k + 2 >= n or (q == 1 and n <= _SHORT):
        return _exact(s, k, ex)
    m = k + 1 + excluding  # one slot proves the cut, one absorbs an excluded row
    part, vals = _best(s, m)
    if excluding:
        keep = part != ex[:, None]
        keep[keep.all(1), -1] = False  # no excluded row among them: drop the worst, keep m - 1
        part, vals = part[keep].reshape(q, m - 1), vals[keep].reshape(q, m - 1)
    out_s, out_i = vals[:, :k], part[:, :k]
    tied = vals[:, k] >= vals[:, k - 1]  # the next best equals the k-th: a tie may cross the cut
    if tied.any():
        rows = np.nonzero(tied)[0]
        out_s, out_i = out_s.copy(), out_i.copy()
        out_s[rows], out_i[rows] = _exact(s[rows], k, ex[rows])
    return out_s, out_i.astype(np.int64, copy=False)


def _best(s: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The best m of each row, (rows, scores) by score descending, then by row."""
    n = s.shape[1]
    part = np.argpartition(s, n - m, axis=1)[:, n - m:]
    r = np.arange(len(s))[:, None]
    part.sort(axis=1)  # ascending rows, so the stable sort below puts tied rows lower first
    vals = s[r, part]
    if np.isnan(vals).any():  # NaN sorts above everything, so a NaN anywhere lands here
        raise InputError("scores contain NaN")
    order = np.argsort(-vals, axis=1, kind="stable")  # by score descending, then by row
    return part[r, order], vals[r, order]


def _exact(s: np.ndarray, k: int, ex: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slow exact selection: excluded rows to -inf (in a copy), the k-th value, everything above
    it and the lowest of the rows equal to it (O(Q·N), several passes). An excluded row is never
    among the tied: at -inf it would tie with real -inf scores and, lower, win the tie."""
    rows = np.nonzero(ex >= 0)[0]
    if len(rows):
        s = s.copy()
        s[rows, ex[rows]] = -np.inf
    if np.isnan(s).any():
        raise InputError("scores contain NaN")
    q, n = s.shape
    whole = k >= n or (q == 1 and n <= _SHORT)
    if whole and not len(rows):
        ids = np.argsort(-s, axis=1, kind="stable")[:, :k]  # by score, then by row
    elif whole:
        out = np.zeros(s.shape, bool)
        out[rows, ex[rows]] = True
        ids = np.lexsort((-s, out), axis=1)[:, :k]  # excluded last, then by score, then by row
    else:
        kth = -np.partition(-s, k - 1, axis=1)[:, k - 1:k]
        above, tied = s > kth, s == kth
        tied[rows, ex[rows]] = False
        room = k - above.sum(1, keepdims=True)
        keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
        part = np.nonzero(keep)[1].reshape(q, k)  # ascending rows within each query
        order = np.argsort(-np.take_along_axis(s, part, 1), axis=1, kind="stable")
        ids = np.take_along_axis(part, order, 1)
    return np.take_along_axis(s, ids, 1), ids.astype(np.int64)
