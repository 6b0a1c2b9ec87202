"""MovieNet identity set: does the top of the ranking still show the reference's character?

The set's layout, record checks and reader are its format's (`cir_core.formats.movienet`); the
builder `python -m cir_core.benchmarks.movienet build` writes it from MovieNet's release
(docs/MOVIENET.md). Here the set becomes a gallery and queries: the reference frame is removed
from its own ranking, and the reference character's box is drawn on the reference wherever it is
shown (annotation, Compare, figures) so the person to follow is unambiguous.
Metrics: identity@1/5/10 = share of scored queries with a frame showing the reference's
character among the top 1/5/10, and identity@n, the number of scored queries.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.formats import movienet as movienet_format
from cir_core.formats.movienet import Frame, IdentityQuery
from cir_core.gallery import Gallery, GalleryItem
from cir_core.gallery_spec import GalleryContext, GallerySpec, OpenedGallery, register_opener
from cir_core.metrics import identity_at_k

from ..common import TOP, BenchmarkResult, Composed, Embedded, ScoreOpts, compose_queries, rank_queries
from ..registry import register_benchmark

KS = (1, 5, 10)


@register_opener("movienet")
def open_movienet(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    """`movienet:ROOT`: a MovieNet identity set's frames (the annotation tab pools its queries)."""
    return OpenedGallery(load_movienet_queryset(spec.path)[1])


def load_movienet_queryset(root: str | Path) -> tuple[list[dict[str, Any]], Gallery]:
    """The identity query set for annotation pooling.

    Returns (queries, gallery): each query is {"external_id": query_id, "reference_id": the
    reference frame's gallery item id, "edit_text": str, "meta": {"film_id", "character_id",
    and when known "character_box", "character_name", "actor", "edit_type"}}; gallery item ids
    are the frame paths relative to ROOT, item.meta = {"film_id", "character_ids": [str, ...],
    and when given "cast": [{"pid", "bbox"}], "resolution": [w, h]}; a reference frame's meta
    also holds "reference_character" ({"pid", "name", "box"}: its first query's character, what
    Compare marks). Raises BenchmarkError naming the file and line on bad input.
    """
    return _queryset(*movienet_format.read_set(Path(root).expanduser()))


def _queryset(frames: list[Frame], records: list[IdentityQuery]) -> tuple[list[dict[str, Any]], Gallery]:
    gallery = Gallery("movienet-identity", [_item(f) for f in frames])
    queries = [_query(q) for q in records]
    for q in queries:
        m, ref = q["meta"], gallery.items[gallery.index_of(q["reference_id"])]
        if m.get("character_box") and "reference_character" not in ref.meta:
            ref.meta["reference_character"] = {"pid": m["character_id"], "name": m.get("character_name") or "",
                                               "box": m["character_box"]}
    return queries, gallery


def _item(f: Frame) -> GalleryItem:
    meta: dict[str, Any] = {"film_id": f.film_id, "character_ids": f.character_ids}
    if f.cast is not None:
        meta["cast"] = [{"pid": c.pid, "bbox": c.bbox} for c in f.cast]
        meta["resolution"] = f.resolution
    return GalleryItem(f.frame, f.path, meta)


def _query(q: IdentityQuery) -> dict[str, Any]:
    meta: dict[str, Any] = {"film_id": q.film_id, "character_id": q.character_id}
    meta.update((k, v) for k, v in (("character_name", q.character_name), ("actor", q.actor),
                                    ("edit_type", q.edit_type), ("character_box", q.character_box)) if v is not None)
    return {"external_id": q.query_id, "reference_id": q.reference_frame, "edit_text": q.edit, "meta": meta}


@dataclass
class MovieNetBench:
    queries: list[dict[str, Any]]
    gallery: Gallery
    split: str = "val"
    name: str = "movienet"
    protocol: str = "reference frame removed; identity@k over the frames' character ids"
    labelled: bool = True

    def galleries(self) -> dict[str, Gallery]:
        return {"gallery": self.gallery}

    def n_queries(self) -> int:
        return len(self.queries)

    def ref_rows(self) -> np.ndarray:
        return np.array([self.gallery.index_of(q["reference_id"]) for q in self.queries], np.int64)

    def compose(self, method, data: Embedded) -> Composed:
        return compose_queries(method, data.refs("gallery", self.ref_rows()), [[x["edit_text"]] for x in self.queries])

    def score(self, method, c: Composed, data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        g, ref_rows = data.emb["gallery"], self.ref_rows()
        ranked = rank_queries(method, c.q, c.q_empty, g[ref_rows], g, opts, ref_rows, TOP).ids
        chars = [frozenset(it.meta["character_ids"]) for it in self.gallery.items]
        ks = [k for k in KS if k <= ranked.shape[1]]
        metrics = identity_at_k(ranked, chars, [x["meta"]["character_id"] for x in self.queries], ks)
        ids = self.gallery.ids
        return BenchmarkResult(metrics, top={x["external_id"]: [ids[j] for j in r]
                                          for x, r in zip(self.queries, ranked)})


@register_benchmark("movienet", "a MovieNet identity set: identity@K")
def load(root: str | Path, split: str = "val") -> MovieNetBench:
    """The MovieNet identity set from ROOT (one split, val)."""
    return MovieNetBench(*_queryset(*movienet_format.read(Path(root).expanduser(), split)))
