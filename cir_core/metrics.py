"""Retrieval metrics over ranked gallery ids, numpy in / fractions in [0, 1] out.

`ranked` is always (Q, K) int gallery ids, best first (e.g. `scoring.rank(...)[1]`), one row per
query. Scores are not consulted, so ties are whatever order the ranking gave.
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


def recall_at_k(
    ranked: np.ndarray, target: np.ndarray, ks: Sequence[int] = (1, 5, 10, 50)
) -> dict[str, float]:
    """R@k: fraction of queries whose single target is among the first k ids."""
    r, ks = _ranked(ranked, ks)
    t = _per_query(target, r.shape[0], "target")
    hit = r == t[:, None]  # (Q, K); at most one True per row
    first = np.where(hit.any(1), hit.argmax(1), r.shape[1])  # 0-based rank, K if absent
    return {f"R@{k}": float(np.mean(first < k)) for k in ks}


def subset_recall_at_k(
    ranked: np.ndarray,
    subsets: np.ndarray,
    target: np.ndarray,
    ks: Sequence[int] = (1, 2, 3),
    exclude: np.ndarray | None = None,
) -> dict[str, float]:
    """CIRR Recall_subset@k: rank of the target among its subset's members only.

    The members are ordered as they appear in `ranked` (a ranking over the full gallery), so
    `ranked` must contain every member that takes part: pass a full ranking. The reference is
    excluded, as in CIRR: either give `exclude` (Q,) reference ids (then every other member must
    be in `ranked`), or leave it None and let the ranking have dropped it (then at most one
    member per query may be absent from `ranked`; more means the ranking was truncated).
    A target absent from `ranked` or from its subset counts as a miss.
    """
    r, _ = _ranked(ranked, [1])
    nq = r.shape[0]
    subs = np.asarray(subsets)
    if subs.ndim != 2 or subs.shape[0] != nq:
        raise InputError(f"subsets must be (Q={nq}, S), got {subs.shape}")
    t = _per_query(target, nq, "target")
    ex = None if exclude is None else _per_query(exclude, nq, "exclude")
    ks = [int(k) for k in ks]
    if any(k < 1 for k in ks):
        raise InputError(f"ks must be >= 1, got {ks}")
    pos_rank = []
    for i in range(nq):
        pos = {int(g): p for p, g in enumerate(r[i])}
        members = [int(m) for m in subs[i] if ex is None or int(m) != int(ex[i])]
        missing = [m for m in members if m not in pos]
        if len(missing) > (0 if ex is not None else 1):
            raise InputError(
                f"query {i}: subset members {missing} are not in the ranking; pass a full ranking"
            )
        tgt = int(t[i])
        if tgt not in pos or tgt not in members:
            pos_rank.append(len(members))  # miss at every k
            continue
        # 0-based rank of the target among the present members = how many come before it
        pos_rank.append(sum(pos[m] < pos[tgt] for m in members if m in pos))
    pr = np.asarray(pos_rank)
    return {f"Rs@{k}": float(np.mean(pr < k)) for k in ks}


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
