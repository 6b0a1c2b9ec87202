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
from typing import Iterable, Protocol, Sequence

import numpy as np

from ..search.scoring import Queries, ScoreOpts, chord_terms
from ..search.searcher import RemoteSearcher, Searcher, Shortlist, rank
from .results import MapPoint, MethodResult, NeighbourhoodMap, Progression, Reference, Why

MAP_TARGETS = 12  # ground-truth rows drawn at most (a film query can have dozens)
RANK_DEPTH = 200  # a result's rank under the other scoring is looked for this deep (None: deeper)


class RowSource(Protocol):
    """Where gallery rows' vectors are read: a searcher, or `FetchedRows`."""

    def fetch(self, rows: np.ndarray) -> Shortlist: ...


class FetchedRows:
    """`searcher.fetch` of the rows a request explains, read in one call and then served from
    memory: a vector store answers once, not once per method and again for the map."""

    def __init__(self, searcher: Searcher | RemoteSearcher, rows: Iterable[int]):
        self._ids = np.asarray(sorted(set(rows)), np.int64)
        self._vecs, self._norms = np.zeros((0, 0), np.float32), np.zeros(0, np.float32)
        if len(self._ids):  # nothing to read (every column failed) asks the store nothing
            _, self._vecs, self._norms = searcher.fetch(self._ids)
        self._at = {r: i for i, r in enumerate(self._ids.tolist())}

    def fetch(self, rows: np.ndarray) -> Shortlist:
        """(rows, their vectors, their norms); a row not read at construction is a KeyError."""
        idx = np.array([self._at[int(r)] for r in rows], np.int64)
        return rows, self._vecs[idx], self._norms[idx]


@dataclass(frozen=True)
class Explained:
    """What `explain_hits` needs of one method: its result, its query (1, D), its q_∅ (1, D) and
    the Chord λ it gets."""

    result: MethodResult
    q: np.ndarray
    q_empty: np.ndarray
    lam: float


def explain_hits(items: Sequence[Explained], reference: Reference, searcher: Searcher | RemoteSearcher,
                 variant: str = "empty", vectors: RowSource | None = None) -> None:
    """Set each hit's `why`: its cosine and direction terms (exact, on its own row) and its rank
    under cosine and under Chord (λ the method's), the reference left out, ranked the way the
    searcher ranks the gallery (`cir_core.search.rank`: ties to the lower row; an approximate
    index ranks its shortlist), as deep as `RANK_DEPTH` (None below it). The hits' vectors are read
    from `vectors` (default: the searcher)."""
    if not items:
        return
    source: RowSource = searcher if vectors is None else vectors
    q = np.concatenate([it.q for it in items])
    q0 = np.concatenate([it.q_empty for it in items])
    v_r = np.asarray(reference.embedding, np.float32)[None]
    lams = [it.lam for it in items]
    n = len(searcher)
    depth = min(max(RANK_DEPTH, max(len(it.result.hits) for it in items)), n - (reference.row is not None))
    exclude = np.full(len(items), -1 if reference.row is None else reference.row)
    by_cos = rank(Queries(q, None, v_r), searcher, ScoreOpts("cosine"), depth, exclude)
    by_chord = rank(Queries(q, q0, v_r), searcher, ScoreOpts("chord", variant=variant).per_query(lams), depth,
                    exclude)
    for b, it in enumerate(items):
        rows = np.array([h.row for h in it.result.hits], np.int64)
        if not len(rows):
            continue
        _, vecs, norms = source.fetch(rows)  # in process or from a vector store: the same rows
        c, d = (x[0] for x in chord_terms(it.q, it.q_empty, v_r, vecs, variant, norms=norms))
        at_cos = {int(r): i + 1 for i, r in enumerate(by_cos.ids[b].tolist()) if r >= 0}
        at_chord = {int(r): i + 1 for i, r in enumerate(by_chord.ids[b].tolist()) if r >= 0}
        for h, ci, di in zip(it.result.hits, c.tolist(), d.tolist()):
            h.why = Why(ci, di, it.lam, at_cos.get(h.row), at_chord.get(h.row))


def neighbourhood_map(reference: Reference, queries: dict[str, np.ndarray], results: Sequence[MethodResult],
                      progression: Progression | None, steps: np.ndarray | None, targets: Sequence[int],
                      vectors: RowSource) -> NeighbourhoodMap | None:
    """The map of one request: PCA of the images (the reference, every method's top-k, up to
    `MAP_TARGETS` ground-truth rows), every query (`queries`: method -> (1, D)) and the
    progression's step queries (`steps`, (n, D)) projected onto its two axes. Axes are signed so
    that the reference lies at x <= 0, y <= 0. None with fewer than three distinct images. The
    images' vectors are read from `vectors` (a searcher: the gallery in process or a vector store's
    rows; or `FetchedRows`)."""
    rows = list(dict.fromkeys([h.row for m in results for h in m.hits] + sorted(targets)[:MAP_TARGETS]))
    if reference.row is not None:
        rows = [r for r in rows if r != reference.row]
    if len(rows) < 2:  # the reference and at most one other image
        return None
    shown = vectors.fetch(np.asarray(rows, np.int64))[1]
    images = np.concatenate([np.asarray(reference.embedding, np.float32)[None], shown])
    images = (images / np.maximum(np.linalg.norm(images, axis=1, keepdims=True), 1e-12)).astype(np.float64)
    mean = images.mean(0)
    centred = images - mean
    # the PCA from the images' small Gram matrix (n x n, n <= ~130) rather than an SVD of n x D:
    # the same axes, and LAPACK's SVD took ~0.1 s here on 2 busy cores (measured)
    lam, u = np.linalg.eigh(centred @ centred.T)
    lam, u = lam[::-1], u[:, ::-1]
    keep = np.maximum(lam[:2], 1e-24)
    axes = (centred.T @ u[:, :2] / np.sqrt(keep)).T  # (2, D), unit rows
    total = float(np.clip(lam, 0, None).sum())
    explained = float(np.clip(lam[:2], 0, None).sum() / total) if total > 0 else 0.0

    def project(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32).reshape(-1, images.shape[1])
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return (x - mean) @ axes.T

    sign = np.where(project(images[:1])[0] > 0, -1.0, 1.0)  # the reference at x <= 0, y <= 0

    def xy(v: np.ndarray) -> list[tuple[float, float]]:
        return [(float(x), float(y)) for x, y in (p * sign for p in project(v))]

    at = dict(zip(rows, xy(shown), strict=True))
    pts = [MapPoint("reference", *xy(images[0])[0], row=reference.row)]
    pts += [MapPoint("target", *at[r], row=r) for r in sorted(targets)[:MAP_TARGETS]]
    for m in results:
        if m.name in queries:
            pts.append(MapPoint("query", *xy(queries[m.name])[0], method=m.name))
        pts += [MapPoint("result", *at[h.row], method=m.name, rank=h.rank, row=h.row) for h in m.hits]
    if progression is not None and steps is not None:
        pts += [MapPoint("step", *p, method=progression.method, rank=i + 1) for i, p in enumerate(xy(steps))]
    return NeighbourhoodMap(pts, round(explained, 4), len(images))

