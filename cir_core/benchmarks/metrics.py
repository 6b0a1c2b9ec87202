"""Metric functions of the real benchmarks, numpy in / numpy or fractions out.

Rankings break ties by the lower gallery row, so a hand-made score matrix has one exact answer.
The plain recall and mAP formulas live in `cir_core.metrics` and are re-exported here.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cir_core.errors import InputError
from cir_core.metrics import map_at_k, recall_at_k  # noqa: F401  (re-exported)

__all__ = ["topk_ranking", "recall_at_k", "map_at_k", "subset_ranking", "subset_recall",
           "candidate_recall", "identity_at_k", "prefix_recall"]


def _scores(scores: np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise InputError(f"scores must be a non-empty (Q, N) array, got shape {s.shape}")
    if np.isnan(s).any():
        raise InputError("scores contain NaN")
    return s


def topk_ranking(scores: np.ndarray, k: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """(Q, k') int64 best-first gallery rows; `exclude` (Q,) rows (-1: none) never appear.

    k' = min(k, rankable rows). Ties go to the lower row, also across the k-th place."""
    s = _scores(scores).copy()
    q, n = s.shape
    if exclude is not None:
        ex = np.asarray(exclude, dtype=np.int64).reshape(-1)
        if ex.shape != (q,) or ((ex < -1) | (ex >= n)).any():
            raise InputError(f"exclude must be ({q},) rows in [-1, {n}), got {ex.shape}")
        rows = np.nonzero(ex >= 0)[0]
        s[rows, ex[rows]] = -np.inf
        n_rank = n - int((ex >= 0).any())
    else:
        n_rank = n
    k = min(int(k), n_rank)
    if k < 1:
        raise InputError("nothing to rank once the reference is excluded")
    if k >= n:
        return np.argsort(-s, axis=1, kind="stable")[:, :k].astype(np.int64)
    # The k-th best value per row; keep everything above it and, of the rows equal to it, the
    # lowest ones, so ties at the cut resolve like a full stable sort would (exact, O(Q·N)).
    kth = -np.partition(-s, k - 1, axis=1)[:, k - 1 : k]
    above, tied = s > kth, s == kth
    room = k - above.sum(1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
    part = np.nonzero(keep)[1].reshape(q, k)  # ascending rows within each query
    order = np.argsort(-np.take_along_axis(s, part, 1), axis=1, kind="stable")
    return np.take_along_axis(part, order, 1).astype(np.int64)


def subset_ranking(member_scores: np.ndarray, members: np.ndarray,
                   exclude: np.ndarray | None = None) -> np.ndarray:
    """CIRR's subset ranking: (Q, S) member rows ordered by score, best first, ties to the lower
    row. Padding (-1) and each query's excluded row (its reference) are moved to the end as -1."""
    sc = _scores(member_scores).copy()
    m = np.asarray(members, dtype=np.int64)
    if m.shape != sc.shape:
        raise InputError(f"members {m.shape} and member_scores {sc.shape} differ in shape")
    drop = m < 0
    if exclude is not None:
        drop |= m == np.asarray(exclude, dtype=np.int64).reshape(-1, 1)
    sc[drop] = -np.inf
    # Sort key: score desc, then row asc; -1 padding is pushed last by the -inf score + mask.
    order = np.lexsort((m, -sc), axis=1)
    out = np.take_along_axis(m, order, 1)
    out[np.take_along_axis(drop, order, 1)] = -1
    return out


def subset_recall(ranked_members: np.ndarray, target: np.ndarray,
                  ks: Sequence[int] = (1, 2, 3)) -> dict[str, float]:
    """Recall_subset@k from `subset_ranking`'s output: is the target among the first k members?"""
    r = np.asarray(ranked_members)
    t = np.asarray(target).reshape(-1)
    if r.ndim != 2 or t.shape != (r.shape[0],) or r.shape[0] == 0:
        raise InputError(f"ranked_members (Q, S) and target (Q,) do not fit: {r.shape}, {t.shape}")
    hit = (r == t[:, None]) & (r >= 0)
    first = np.where(hit.any(1), hit.argmax(1), r.shape[1])
    return {f"Rs@{k}": float(np.mean(first < k)) for k in ks}


def candidate_recall(scores: np.ndarray, ks: Sequence[int] = (1, 2, 3),
                     target_col: int = 0) -> dict[str, float]:
    """GeneCIS: each row scores one query's own candidates with the target at `target_col`; R@k
    = share of rows where the target is among the k best (ties go to the lower column)."""
    s = _scores(scores)
    rank = (s > s[:, [target_col]]).sum(1) + (s[:, :target_col] == s[:, [target_col]]).sum(1)
    return {f"R@{k}": float(np.mean(rank < k)) for k in ks}


def identity_at_k(ranked: np.ndarray, item_ids: Sequence[frozenset | set], query_id: Sequence,
                  ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Share of queries whose top-k holds a gallery row showing the query's identity.

    `item_ids[row]` is the set of identities visible in that row; a query whose identity is None
    or "" is skipped (no ground truth). `identity@n` counts the queries that took part."""
    r = np.asarray(ranked)
    if r.ndim != 2 or len(query_id) != r.shape[0]:
        raise InputError(f"ranked (Q, K) and query_id (Q,) do not fit: {r.shape}, {len(query_id)}")
    rows = [i for i, c in enumerate(query_id) if c not in (None, "")]
    out: dict[str, float] = {"identity@n": float(len(rows))}
    if not rows:
        return out
    hit = np.array([[j >= 0 and query_id[i] in item_ids[j] for j in r[i]] for i in rows], bool)
    for k in ks:
        out[f"identity@{k}"] = float(hit[:, :k].any(1).mean())
    return out


def prefix_recall(target_ranks: np.ndarray, k: int = 10) -> list[float]:
    """R@k after each sentence prefix: `target_ranks` (Q, S) 0-based ranks of the target after
    sentences 1..s (a query with fewer sentences repeats its last rank). One value per column."""
    r = np.asarray(target_ranks)
    if r.ndim != 2 or r.shape[0] == 0:
        raise InputError(f"target_ranks must be (Q, S), got {r.shape}")
    return [float(np.mean(r[:, j] < k)) for j in range(r.shape[1])]
