"""The project's one top-k over a score matrix, numpy in / numpy out.

Exact and deterministic: the result equals a full stable sort of each row by descending score,
i.e. ties go to the lower gallery row, also across the k-th place, so a hand-made score matrix
has one right answer and two code paths that score alike rank alike.
"""
from __future__ import annotations

import numpy as np

from .errors import InputError


def topk(scores: np.ndarray, k: int, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(scores (Q, k'), rows (Q, k') int64), best first, for a (Q, N) score matrix.

    `exclude` (Q,) holds one row per query that must not appear (-1: none), e.g. the reference.
    k' = min(k, rankable rows). The input is never modified."""
    s = np.asarray(scores)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise InputError(f"scores must be a non-empty (Q, N) array, got shape {s.shape}")
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    if np.isnan(s).any():
        raise InputError("scores contain NaN")
    q, n = s.shape
    n_rank = n
    if exclude is not None:
        ex = np.asarray(exclude, dtype=np.int64).reshape(-1)
        if ex.shape != (q,) or ((ex < -1) | (ex >= n)).any():
            raise InputError(f"exclude must be ({q},) rows in [-1, {n}), got {ex.shape}")
        rows = np.nonzero(ex >= 0)[0]
        if len(rows):
            s = s.copy()
            s[rows, ex[rows]] = -np.inf
            n_rank = n - 1
    k = min(int(k), n_rank)
    if k < 1:
        raise InputError("nothing to rank once the reference is excluded")
    if k >= n:
        ids = np.argsort(-s, axis=1, kind="stable")[:, :k]
    else:
        # The k-th best value per row; keep everything above it and, of the rows equal to it, the
        # lowest ones, so ties at the cut resolve like a full stable sort would (exact, O(Q·N)).
        kth = -np.partition(-s, k - 1, axis=1)[:, k - 1:k]
        above, tied = s > kth, s == kth
        room = k - above.sum(1, keepdims=True)
        keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
        part = np.nonzero(keep)[1].reshape(q, k)  # ascending rows within each query
        order = np.argsort(-np.take_along_axis(s, part, 1), axis=1, kind="stable")
        ids = np.take_along_axis(part, order, 1)
    return np.take_along_axis(s, ids, 1), ids.astype(np.int64)
