"""Ranking a fixed gallery: `Searcher` decides once how it is searched, `rank` ranks queries
against it. The one ranking path of the project: the app's search stage, every benchmark and
the trainers' validation.

A `Searcher` (the gallery in this process) is one of three, chosen by `Searcher.for_gallery` from
the gallery's size and what was prebuilt for it:

- exact: one float32 product over the gallery, in blocks of queries (torch's MKL for 2-64
  queries, numpy's for larger batches; `scoring._cosine`);
- exact through the int8 filter (`prefilter.Int8Filter`, 16k+ rows): cosine scores of int8 codes
  with a Cauchy-Schwarz bound narrow the search to a few hundred rows re-scored in float32, where
  the calibrated rule `use_filter(n, b)` says it is faster (the same answer);
- approximate: an HNSW / IVF index's cosine shortlist per query, re-scored exactly (cosine or
  Chord), for galleries past `EXACT_MAX` rows or a prebuilt approximate index.

The searcher owns the gallery's norms, filter and index; nothing else holds a copy.

A `RemoteSearcher` searches a gallery whose vectors stay outside the process (a `VectorStore`:
a Milvus collection, `cir_core.index.milvus`): the store's approximate cosine shortlist, with the
rows' vectors, re-scored exactly by the same code as the in-process approximate path.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import InputError
from .index import EXACT_MAX, Index
from .prefilter import Int8Filter, filter_for, use_filter
from .scoring import Queries, ScoreOpts, as_rows, cosine_unit, gallery_norms, score_matrix, unit_rows
from .topk import topk

# Used by an approximate searcher: cosine top-200 holds the Chord top-k in practice for k <= 50
# while keeping the exact re-score cheap.
DEFAULT_SHORTLIST = 200
# A shortlist: its gallery rows (S,), their vectors (S, D) and those vectors' norms (S,)
Shortlist = tuple[np.ndarray, np.ndarray, np.ndarray]
# Exact scoring works in blocks of queries holding at most this many scores (~64 MB in float32),
# so a 123k-image gallery (CIRCO) never materialises a (Q, N) matrix for every query at once.
_BLOCK_ENTRIES = 16_000_000


@dataclass(frozen=True, eq=False)
class Searcher:
    """How one fixed gallery (`embeddings`, (N, D) float32) is searched: exactly, exactly through
    `prefilter`, or by `index`'s shortlist (approximate). Build it with `for_gallery` or `exact`."""

    embeddings: np.ndarray
    norms: np.ndarray
    index: Index | None = None  # an approximate index (HNSW, IVF): its shortlist is re-scored
    prefilter: Int8Filter | None = None  # exact cosine search of 16k+ rows, where use_filter says
    shortlist: int = DEFAULT_SHORTLIST

    def __post_init__(self) -> None:
        g = self.embeddings
        if g.ndim != 2 or g.shape[0] == 0 or g.dtype != np.float32:
            raise InputError(f"gallery must be float32 (N, D) with N >= 1, got {g.shape} {g.dtype}")
        if self.norms.shape != (g.shape[0],):
            raise InputError(f"norms must have shape ({g.shape[0]},), got {self.norms.shape}")
        if self.index is not None and (self.index.kind == "flat" or
                                       (self.index.ntotal, self.index.dim) != g.shape):
            raise InputError(f"a searcher's index is an approximate one over this gallery ({g.shape}), "
                             f"not a {self.index.kind} index of {self.index.ntotal} x {self.index.dim}")
        if self.prefilter is not None and (self.prefilter.n, self.prefilter.dim) != g.shape:
            raise InputError(f"prefilter ({self.prefilter.n} x {self.prefilter.dim}) was not built over "
                             f"this gallery {g.shape}")

    @classmethod
    def exact(cls, embeddings: np.ndarray, norms: np.ndarray | None = None) -> "Searcher":
        """Exact float32 search, no filter (what the benchmarks' published tables use)."""
        g = np.ascontiguousarray(embeddings, dtype=np.float32)
        return cls(g, gallery_norms(g) if norms is None else np.asarray(norms, np.float32))

    @classmethod
    def for_gallery(cls, embeddings: np.ndarray, index: Index | None = None, kind: str = "auto",
                    exact_max: int = EXACT_MAX, prefilter: bool = True) -> "Searcher":
        """The searcher a gallery should have: the prebuilt approximate `index` when given, else
        an approximate one built for galleries past `exact_max` rows (`kind` "auto"; or a kind
        forced: "flat", "hnsw", "ivf-flat"), else exact, with the int8 filter where the
        calibrated rule can pick it (`prefilter=False`: without it, for `with_prefilter` later).
        A prebuilt flat index is not kept: exact search reads the embeddings themselves."""
        g = np.ascontiguousarray(embeddings, dtype=np.float32)
        norms = gallery_norms(g)
        if index is None and (kind not in ("auto", "flat") or (kind == "auto" and len(g) > exact_max)):
            index = Index.build(g, kind, exact_max=exact_max)
        if index is not None and index.kind != "flat":
            return cls(g, norms, index=index)
        return cls(g, norms, prefilter=filter_for(g, norms) if prefilter else None)

    def with_prefilter(self) -> "Searcher":
        """This exact searcher with the int8 filter where the rule can pick it (the same answers,
        faster at 16k+ rows); itself when approximate or filtered already."""
        if self.index is not None or self.prefilter is not None:
            return self
        return replace(self, prefilter=filter_for(self.embeddings, self.norms))

    @property
    def kind(self) -> str:
        """"approximate", "exact+int8" or "exact"."""
        return "approximate" if self.index is not None else "exact+int8" if self.prefilter else "exact"

    def __len__(self) -> int:
        return len(self.embeddings)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def shortlists(self, qn: np.ndarray, size: int) -> list[Shortlist]:
        """Each query's approximate cosine shortlist from the index (at most `size` rows)."""
        assert self.index is not None, "only an approximate searcher has shortlists (`rank` asks it alone)"
        cand = self.index.search(qn, min(size, len(self)))[1]
        return [self.fetch(ids[ids >= 0]) for ids in cand]

    def fetch(self, rows: np.ndarray) -> Shortlist:
        """(rows, their vectors, their norms)."""
        return rows, self.embeddings[rows], self.norms[rows]

    def __repr__(self) -> str:
        return f"Searcher({self.kind}, {self.embeddings.shape[0]} x {self.embeddings.shape[1]})"


@runtime_checkable
class VectorStore(Protocol):
    """Gallery vectors held outside this process (a Milvus collection): each query's approximate
    cosine shortlist with the rows' vectors, and rows read by number. Rows are 0..len-1."""

    kind: str  # what it is, for people: "Milvus IVF_FLAT"

    @property
    def dim(self) -> int: ...

    @property
    def shortlist_size(self) -> int:
        """Rows per query's shortlist, the width of the exact re-score."""
        ...

    def __len__(self) -> int: ...

    def shortlist(self, q: np.ndarray, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per unit query row: (gallery rows (S,) int64, their vectors (S, D) float32), S <= size."""
        ...

    def vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' vectors (n, D) float32, their raw feature norms (n,), NaN where unknown)."""
        ...


@dataclass(frozen=True, eq=False)
class RemoteSearcher:
    """How a gallery in a `VectorStore` is searched: its shortlist (`shortlist` rows a query,
    default the store's), re-scored exactly (cosine or Chord) on the vectors that come with it."""

    store: VectorStore
    shortlist: int = 0  # 0: the store's shortlist_size

    @property
    def kind(self) -> str:
        return f"approximate ({self.store.kind})"

    def __len__(self) -> int:
        return len(self.store)

    @property
    def dim(self) -> int:
        return int(self.store.dim)

    def shortlists(self, qn: np.ndarray, size: int) -> list[Shortlist]:
        out = []
        for rows, vecs in self.store.shortlist(qn, min(size, len(self))):
            vecs = np.asarray(vecs, np.float32).reshape(len(rows), self.dim)
            out.append((np.asarray(rows, np.int64), vecs, gallery_norms(vecs)))
        return out

    def fetch(self, rows: np.ndarray) -> Shortlist:
        vecs = np.asarray(self.store.vectors(rows)[0], np.float32).reshape(len(rows), self.dim)
        return rows, vecs, gallery_norms(vecs)

    def __repr__(self) -> str:
        return f"RemoteSearcher({len(self)} x {self.dim}, shortlist {self.shortlist or self.store.shortlist_size})"


class StoreArray:
    """A `VectorStore`'s rows as a read-only array for code that indexes a gallery's embeddings
    (`a[rows]`: those rows' vectors, read from the store; `raw_norms`: their raw feature norms
    instead). `rank` and the benchmarks search it through a `RemoteSearcher`; nothing copies it."""

    def __init__(self, store: VectorStore, raw_norms: bool = False):
        self.store, self.raw_norms = store, raw_norms
        self.dtype = np.dtype(np.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.store),) if self.raw_norms else (len(self.store), int(self.store.dim))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, rows: Any) -> np.ndarray:
        n = len(self.store)
        if isinstance(rows, slice):
            idx = np.arange(*rows.indices(n))
        else:
            idx = np.asarray(rows, np.int64)
        flat = idx.reshape(-1)
        if ((flat < -n) | (flat >= n)).any():
            raise IndexError(f"a row outside 0..{n - 1}")
        vecs, norms = self.store.vectors(np.where(flat < 0, flat + n, flat))
        got = norms if self.raw_norms else vecs
        return got.reshape(idx.shape + got.shape[1:])

    def __repr__(self) -> str:
        return f"StoreArray({' x '.join(map(str, self.shape))}{', raw norms' if self.raw_norms else ''})"


def searcher_for(gallery: np.ndarray | StoreArray) -> Searcher | RemoteSearcher:
    """Exact search of in-process embeddings, or the store's shortlist re-scored for a `StoreArray`."""
    return RemoteSearcher(gallery.store) if isinstance(gallery, StoreArray) else Searcher.exact(gallery)


@dataclass
class Ranking:
    """What `rank` returns: the top-k per query, best first, and optionally the scores of chosen
    gallery rows (a CIRR subset) from the same exact pass."""

    scores: np.ndarray  # (B, k) float32; -inf where an approximate shortlist ran short
    ids: np.ndarray  # (B, k) int64 gallery rows; -1 where it ran short
    at_cols: np.ndarray | None = None  # (B, S) scores at `cols` (-inf at padding)

    def __iter__(self):  # `scores, ids = rank(...)`
        return iter((self.scores, self.ids))


def rank(queries: Queries, searcher: Searcher | RemoteSearcher, opts: ScoreOpts, k: int,
         exclude: np.ndarray | None = None, cols: np.ndarray | None = None) -> Ranking:
    """Top-k gallery rows per query under `opts` (Chord: a resolved λ, one or one per query;
    ties to the lower row, `topk`), the way `searcher` searches.

    `exclude` (B,) holds each query's reference row to drop (-1: none; one value for every
    query). `k` is clipped to the rankable rows. `cols` (B, S) gallery rows (-1: padding) whose
    exact scores are returned too.
    """
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    n = len(searcher)
    qn = unit_rows(as_rows(queries.q, "query", searcher.dim))
    b = qn.shape[0]
    lams = opts.lams(b)
    exclude = _exclude(exclude, b, n)
    k = min(k, n - 1 if (exclude >= 0).any() else n)
    if k < 1:
        raise InputError("nothing left to rank once the reference is excluded")

    def score(sub: np.ndarray, sub_n: np.ndarray, qi: slice) -> np.ndarray:
        if opts.scoring == "cosine":  # without re-checking what rank checked
            return cosine_unit(qn[qi], sub, sub_n, b)
        assert lams is not None  # Chord's options: one λ per query
        part = Queries(qn[qi], _pick(queries.q_empty, qi, b), _pick(queries.v_ref, qi, b))
        return score_matrix(part, sub, ScoreOpts("chord", tuple(lams[qi]), opts.variant), sub_n)

    if isinstance(searcher, Searcher) and searcher.index is None:
        g, gn = searcher.embeddings, searcher.norms
        if searcher.prefilter is not None and opts.scoring == "cosine" and cols is None and use_filter(n, b):
            return _rank_filtered(qn, g, gn, k, exclude, searcher.prefilter)
        return _rank_exact(lambda qi: score(g, gn, qi), b, n, k, exclude, cols)
    # approximate: each query's cosine shortlist (one more row when a reference may be drawn)
    # re-scored exactly, in ascending row order so ties go to the lower row as on the exact path
    size = searcher.shortlist or (searcher.store.shortlist_size if isinstance(searcher, RemoteSearcher)
                                  else DEFAULT_SHORTLIST)
    lists = searcher.shortlists(qn, max(size, k) + int((exclude >= 0).any()))
    out = Ranking(np.full((b, k), -np.inf, np.float32), np.full((b, k), -1, np.int64))
    for i, (ids, vecs, norms) in enumerate(lists):  # per query: shortlists differ; B is small
        order = np.argsort(ids, kind="stable")
        ids, vecs, norms = ids[order], vecs[order], norms[order]
        ref = np.nonzero(ids == exclude[i])[0]  # the reference's column, if drawn
        if len(ids) - len(ref) < 1:
            continue
        row = score(vecs, norms, slice(i, i + 1))
        # dropped by topk, not set to -inf: a short shortlist would rank it among the -inf
        top_s, top_j = topk(row, k, ref[:1] if len(ref) else np.array([-1]), check=False)
        out.scores[i, : top_s.shape[1]], out.ids[i, : top_s.shape[1]] = top_s[0], ids[top_j[0]]
    if cols is not None:
        out.at_cols = _score_cols(searcher, score, b, n, cols)
    return out


def _score_cols(searcher: Searcher | RemoteSearcher, score: Any, b: int, n: int, cols: np.ndarray) -> np.ndarray:
    """(B, S) exact scores at gallery rows `cols` (-inf at padding), their vectors fetched once."""
    cols = _check_cols(cols, b, n)
    out = np.full(cols.shape, -np.inf, np.float32)
    rows = np.unique(cols[cols >= 0])
    if not len(rows):
        return out
    _, vecs, norms = searcher.fetch(rows)
    for i, c in enumerate(cols):
        keep = np.nonzero(c >= 0)[0]
        if len(keep):
            at = np.searchsorted(rows, c[keep])
            out[i, keep] = score(vecs[at], norms[at], slice(i, i + 1))[0]
    return out


def _check_cols(cols: np.ndarray, b: int, n: int) -> np.ndarray:
    cols = np.asarray(cols, np.int64)
    if cols.ndim != 2 or cols.shape[0] != b or (cols >= n).any():
        raise InputError(f"cols must be ({b}, S) gallery rows (-1: padding), got {cols.shape}")
    return cols


def _rank_filtered(qn: np.ndarray, g: np.ndarray, gn: np.ndarray, k: int, exclude: np.ndarray,
                   prefilter: Int8Filter) -> Ranking:
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
        cols = _check_cols(cols, b, n)
    step = max(1, _BLOCK_ENTRIES // n)
    scores, ids, at_cols = [], [], []
    for s in range(0, b, step):
        sl = slice(s, s + step)
        sc = score(sl)
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
