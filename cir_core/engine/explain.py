"""Why a result is where it is: each hit's two score terms (the cosine and Chord's direction term)
and its rank under cosine and under Chord (`explain_hits`), and a 2-D map of the request's
neighbourhood (`neighbourhood_map`): the reference, each method's query, PACE's per-sentence
queries, each method's top-k and the ground truth.

The map is a PCA fit on the *images* only (the reference, the results, the ground truth); each
query is projected onto those two axes. What it can mislead about is said in docs/APP.md
("Why this result"): two axes of a 256–768-dimensional space, distances in the map are not the
scores, and a query's offset from the images (the text–image gap) is mostly off the map.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..search.index import EXACT_MAX
from ..search.scoring import chord_terms
from .results import MapPoint, MethodResult, NeighbourhoodMap, Progression, Reference, Why

MAP_TARGETS = 12  # ground-truth rows drawn at most (a film query can have dozens)


@dataclass(frozen=True)
class Explained:
    """What `explain_hits` needs of one method: its result, its query (1, D), its q_∅ (1, D) and
    the Chord λ it gets."""

    result: MethodResult
    q: np.ndarray
    q_empty: np.ndarray
    lam: float


def explain_hits(items: Sequence[Explained], reference: Reference, gallery: np.ndarray, norms: np.ndarray,
                 variant: str = "empty") -> None:
    """Set each hit's `why`: its cosine and direction terms, and its rank under cosine and under
    Chord (λ the method's) over the whole gallery, the reference left out, ties to the lower row
    as the top-k breaks them. Ranks only up to `EXACT_MAX` rows (None past it: the terms are
    then computed for the hits alone)."""
    if not items:
        return
    q = np.concatenate([it.q for it in items])
    q0 = np.concatenate([it.q_empty for it in items])
    v_r = np.asarray(reference.embedding, np.float32)[None]
    lams = np.array([it.lam for it in items], np.float32)
    whole = len(gallery) <= EXACT_MAX
    if whole:
        cos, direction = chord_terms(q, q0, v_r, gallery, variant, norms=norms)
        chord = cos + lams[:, None] * direction
    for b, it in enumerate(items):
        rows = np.array([h.row for h in it.result.hits], np.int64)
        if not len(rows):
            continue
        if whole:
            c, d = cos[b, rows], direction[b, rows]
            rc, rch = _ranks(cos[b], rows, reference.row), _ranks(chord[b], rows, reference.row)
        else:
            c, d = (x[0] for x in chord_terms(it.q, it.q_empty, v_r, gallery[rows], variant, norms=norms[rows]))
            rc = rch = [None] * len(rows)
        for h, ci, di, r1, r2 in zip(it.result.hits, c.tolist(), d.tolist(), rc, rch):
            h.why = Why(ci, di, it.lam, r1, r2)


def _ranks(scores: np.ndarray, rows: np.ndarray, exclude: int | None) -> list[int]:
    """The 1-based rank of each of `rows` under `scores` (higher first, ties to the lower row),
    `exclude` (the reference) left out."""
    s = scores.copy()
    if exclude is not None:
        s[exclude] = -np.inf
    x = s[rows]
    above = (s[None, :] > x[:, None]).sum(1)
    tied_before = ((s[None, :] == x[:, None]) & (np.arange(len(s))[None, :] < rows[:, None])).sum(1)
    return (1 + above + tied_before).tolist()


def neighbourhood_map(reference: Reference, queries: dict[str, np.ndarray], results: Sequence[MethodResult],
                      progression: Progression | None, steps: np.ndarray | None, targets: Sequence[int],
                      gallery: np.ndarray) -> NeighbourhoodMap | None:
    """The map of one request: PCA of the images (the reference, every method's top-k, up to
    `MAP_TARGETS` ground-truth rows), every query (`queries`: method -> (1, D)) and the
    progression's step queries (`steps`, (n, D)) projected onto its two axes. Axes are signed so
    that the reference lies at x <= 0, y <= 0. None with fewer than three distinct images."""
    rows = list(dict.fromkeys([h.row for m in results for h in m.hits] + sorted(targets)[:MAP_TARGETS]))
    if reference.row is not None:
        rows = [r for r in rows if r != reference.row]
    images = np.concatenate([np.asarray(reference.embedding, np.float32)[None], gallery[rows]])
    if len(images) < 3:
        return None
    images = images / np.maximum(np.linalg.norm(images, axis=1, keepdims=True), 1e-12)
    mean = images.mean(0)
    _, sv, vt = np.linalg.svd(images - mean, full_matrices=False)
    axes = vt[:2]
    total = float((sv ** 2).sum())
    explained = float((sv[:2] ** 2).sum() / total) if total > 0 else 0.0

    def project(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32).reshape(-1, images.shape[1])
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return (x - mean) @ axes.T

    sign = np.where(project(images[:1])[0] > 0, -1.0, 1.0)  # the reference at x <= 0, y <= 0
    xy = lambda v: [tuple(float(c) for c in p * sign) for p in project(v)]  # noqa: E731
    at = {r: xy(gallery[r])[0] for r in rows}
    pts = [MapPoint("reference", *xy(images[0])[0], row=reference.row)]
    pts += [MapPoint("target", *at[r], row=r) for r in sorted(targets)[:MAP_TARGETS]]
    for m in results:
        if m.name in queries:
            pts.append(MapPoint("query", *xy(queries[m.name])[0], method=m.name))
        pts += [MapPoint("result", *at[h.row], method=m.name, rank=h.rank, row=h.row) for h in m.hits]
    if progression is not None and steps is not None:
        pts += [MapPoint("step", *p, method=progression.method, rank=i + 1) for i, p in enumerate(xy(steps))]
    return NeighbourhoodMap(pts, round(explained, 4), len(images))

