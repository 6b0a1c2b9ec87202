"""The project's one metrics module: retrieval metrics over ranked gallery rows (or over score
matrices where a protocol ranks small candidate sets), numpy in / fractions in [0, 1] out.

`ranked` is always (Q, K) int gallery rows, best first (e.g. `scoring.rank(...).ids`), one row per
query. Where scores are ranked here, ties go to the lower row, as in `cir_core.search.topk`.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .errors import InputError


def _ranked(ranked: np.ndarray, ks: Iterable[int]) -> tuple[np.ndarray, list[int]]:
    r = np.asarray(ranked)
    if r.ndim != 2 or not np.issubdtype(r.dtype, np.integer):
        raise InputError(f"ranked must be a (Q, K) integer array, got {r.dtype} {r.shape}")
    if r.shape[0] == 0:
        raise InputError("no queries")
    ks = [int(k) for k in ks]
    if any(k < 1 or k > r.shape[1] for k in ks):
        raise InputError(f"ks {ks} need 1 <= k <= {r.shape[1]} (the ranking's length)")
    return r, ks


def _per_query(x: np.ndarray, q: int, name: str) -> np.ndarray:
    x = np.asarray(x).reshape(-1)
    if x.shape != (q,):
        raise InputError(f"{name} must have one entry per query ({q}), got {x.shape}")
    return x


def target_position(ranked: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(Q,) 0-based position of each query's single target among its ranked ids (K if absent)."""
    r, _ = _ranked(ranked, [1])
    t = _per_query(target, r.shape[0], "target")
    hit = r == t[:, None]  # (Q, K); at most one True per row
    return np.where(hit.any(1), hit.argmax(1), r.shape[1])


def recall_from_ranks(ranks: np.ndarray, ks: Sequence[int]) -> dict[str, float]:
    """R@k from each query's 0-based target rank: the fraction ranked below k."""
    r = np.asarray(ranks).reshape(-1)
    if r.size == 0:
        raise InputError("no queries")
    return {f"R@{k}": float(np.mean(r < k)) for k in ks}


def recall_at_k(
    ranked: np.ndarray, target: np.ndarray, ks: Sequence[int] = (1, 5, 10, 50)
) -> dict[str, float]:
    """R@k: fraction of queries whose single target is among the first k ids."""
    _, ks = _ranked(ranked, ks)
    return recall_from_ranks(target_position(ranked, target), ks)


def map_at_k(
    ranked: np.ndarray, gt: Sequence[Iterable[int]], ks: Sequence[int] = (5, 10, 25, 50)
) -> dict[str, float]:
    """CIRCO mAP@K: AP@K = sum_{k<=K} P(k) rel(k) / min(|GT|, K), averaged over queries."""
    r, ks = _ranked(ranked, ks)
    if len(gt) != r.shape[0]:
        raise InputError(f"gt must have one set per query ({r.shape[0]}), got {len(gt)}")
    kmax = max(ks)
    ap = np.zeros((r.shape[0], len(ks)))
    for i, g in enumerate(gt):
        g = {int(x) for x in np.asarray(list(g)).reshape(-1)}
        if not g:
            raise InputError(f"query {i} has an empty ground-truth set")
        rel = np.fromiter((int(x) in g for x in r[i, :kmax]), bool, kmax)
        prec_at = np.cumsum(rel) / np.arange(1, kmax + 1)  # P(k)
        contrib = np.cumsum(prec_at * rel)  # sum_{j<=k} P(j) rel(j)
        for j, k in enumerate(ks):
            ap[i, j] = contrib[k - 1] / min(len(g), k)
    return {f"mAP@{k}": float(ap[:, j].mean()) for j, k in enumerate(ks)}


def identity_at_1(top1_identity: np.ndarray, ref_identity: np.ndarray) -> float:
    """Fraction of queries whose top-1 result shows the reference's identity (e.g. character)."""
    a = np.asarray(top1_identity).reshape(-1)
    b = _per_query(ref_identity, a.shape[0], "ref_identity")
    if a.size == 0:
        raise InputError("no queries")
    return float(np.mean(a == b))


def edit_at_1(ranked: np.ndarray, edit_ok: Sequence[Iterable[int]]) -> float:
    """Fraction of queries whose top-1 id is in that query's set of edit-satisfying items."""
    r, _ = _ranked(ranked, [1])
    if len(edit_ok) != r.shape[0]:
        raise InputError(f"edit_ok must have one set per query ({r.shape[0]}), got {len(edit_ok)}")
    return float(np.mean([int(r[i, 0]) in {int(x) for x in ok} for i, ok in enumerate(edit_ok)]))


def _scores(scores: np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise InputError(f"scores must be a non-empty (Q, N) array, got shape {s.shape}")
    if np.isnan(s).any():
        raise InputError("scores contain NaN")
    return s


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


def prefix_recall(ranks: np.ndarray, k: int = 10) -> list[float]:
    """R@k after each sentence prefix: `ranks` (Q, S) 0-based ranks of the target after
    sentences 1..s (a query with fewer sentences repeats its last rank). One value per column."""
    r = np.asarray(ranks)
    if r.ndim != 2 or r.shape[0] == 0:
        raise InputError(f"target_ranks must be (Q, S), got {r.shape}")
    return [float(np.mean(r[:, j] < k)) for j in range(r.shape[1])]


def progression_summary(ranks: np.ndarray, n_steps: np.ndarray) -> dict[str, float]:
    """Does retrieval sharpen as sentences accumulate? `ranks` (Q, W) 0-based target ranks after
    each step (a query with fewer steps repeats its last rank), `n_steps` (Q,) its real steps.
    R@10 after the first / last step, the share whose rank improved (or held) from first to last,
    of k -> k+1 transitions that improved or held, and of queries where every step did. What a
    step is depends on the protocol: under `prefix` step k is "given sentences 1..k" (step 1: the
    first sentence alone); under `states` it is a method's own state after k steps (PACE's q_0
    has already read the whole text, so step 1 is not "the first sentence")."""
    r, n = np.asarray(ranks), np.asarray(n_steps).reshape(-1)
    if r.ndim != 2 or r.shape[0] == 0 or n.shape != (r.shape[0],):
        raise InputError(f"ranks (Q, W) and n_steps (Q,) do not fit: {r.shape}, {n.shape}")
    first, last = r[:, 0], r[:, -1]
    live = np.arange(1, r.shape[1])[None, :] < n[:, None]  # transitions k -> k+1 that exist
    held = r[:, 1:] <= r[:, :-1]
    return {"queries": int(r.shape[0]), "R@10_first_step": round(float((first < 10).mean()), 4),
            "R@10_last_step": round(float((last < 10).mean()), 4),
            "rank_improved": round(float((last < first).mean()), 4),
            "rank_improved_or_held": round(float((last <= first).mean()), 4),
            "step_improved_or_held": round(float(held[live].mean()), 4) if live.any() else float("nan"),
            "every_step_improved_or_held": round(float((held | ~live).all(1).mean()), 4),
            "median_rank_first": float(np.median(first)), "median_rank_last": float(np.median(last))}


def target_ranks(scores: np.ndarray, target: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
    """(Q,) 0-based rank of each row's `target` column in a (Q, N) score matrix, with each row's
    `exclude` column (-1: none) removed; ties go to the lower column, as in `cir_core.search.topk`."""
    s = _scores(scores).copy()
    t = np.asarray(target, dtype=np.int64).reshape(-1)
    if t.shape != (s.shape[0],):
        raise InputError(f"target must have one column per row ({s.shape[0]}), got {t.shape}")
    if exclude is not None:
        ex = np.asarray(exclude, dtype=np.int64).reshape(-1)
        rows = np.nonzero(ex >= 0)[0]
        s[rows, ex[rows]] = -np.inf
    ts = s[np.arange(len(t)), t][:, None]
    before = np.arange(s.shape[1])[None, :] < t[:, None]
    return ((s > ts) | ((s == ts) & before)).sum(1)


def set_recall_at_k(ranked: np.ndarray, sets: Sequence[Iterable[int]], ks: Sequence[int] = (1, 5, 10, 50),
                    name: str = "R") -> dict[str, float]:
    """`name`@k: share of queries with at least one member of its set among the first k ids
    (R@k when the sets are every ground truth; edit@k when they are the edit-satisfying items)."""
    r, ks = _ranked(ranked, ks)
    if len(sets) != r.shape[0]:
        raise InputError(f"sets must have one per query ({r.shape[0]}), got {len(sets)}")
    first = np.array([next((j for j, x in enumerate(row) if int(x) in s), r.shape[1])
                      for row, s in zip(r, ({int(x) for x in g} for g in sets))])
    return {f"{name}@{k}": float(np.mean(first < k)) for k in ks}


def set_ranks(scores: np.ndarray, sets: Sequence[Iterable[int]], exclude: np.ndarray | None = None) -> np.ndarray:
    """(Q,) 0-based rank of each row's best-ranked member of its set in a (Q, N) score matrix,
    each row's `exclude` column (-1: none) removed; ties go to the lower column."""
    s = _scores(scores)
    cols = [np.fromiter((int(x) for x in g), np.int64) for g in sets]
    if len(cols) != s.shape[0] or any(c.size == 0 for c in cols):
        raise InputError(f"every one of the {s.shape[0]} rows needs a non-empty set")
    best = np.array([c[np.lexsort((c, -s[i, c]))[0]] for i, c in enumerate(cols)])
    return target_ranks(s, best, exclude)
