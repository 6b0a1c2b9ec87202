"""MovieNet identity set: does the top of the ranking still show the reference's character?

Layout under ROOT (this project's manifest format; frame paths are relative to ROOT)::

    gallery.jsonl   one {"frame": "frames/tt0120338/shot_0012_img_1.jpg", "film_id": "tt0120338",
                         "character_ids": ["nm0000138", ...]} per gallery frame
    queries.jsonl   one {"query_id", "reference_frame", "edit", "film_id", "character_id"} per query

`reference_frame` must be one of the gallery's frames (it is removed from its own ranking);
`character_id` may be null or "" when unknown: that query is ranked but not scored.
Metrics: identity@1/5/10 = share of scored queries with a frame showing the reference's
character among the top 1/5/10, and identity@n, the number of scored queries.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.gallery import Gallery, GalleryItem
from cir_core.eval.metrics import identity_at_k

from .common import (TOP, BenchmarkError, BenchmarkResult, Composed, Embedded, ScoreOpts, check_files,
                     compose_queries, need, rank_queries, read_jsonl)
from .registry import register_benchmark

KS = (1, 5, 10)


def load_movienet_queryset(root: str | Path) -> tuple[list[dict[str, Any]], Gallery]:
    """The identity query set for annotation pooling.

    Returns (queries, gallery): each query is {"external_id": query_id, "reference_id": the
    reference frame's gallery item id, "edit_text": str, "meta": {"film_id", "character_id"}};
    gallery item ids are the frame paths relative to ROOT, item.meta = {"film_id",
    "character_ids": [str, ...]}. Raises BenchmarkError naming the file and line on bad input.
    """
    root = Path(root).expanduser()
    gpath, qpath = root / "gallery.jsonl", root / "queries.jsonl"
    items = []
    for n, r in enumerate(read_jsonl(gpath), 1):
        where = f"{gpath} line {n}"
        frame = need(r, "frame", str, where)
        chars = need(r, "character_ids", list, where)
        if not all(isinstance(c, str) and c for c in chars):
            raise BenchmarkError(f"{where}: character_ids should be a list of non-empty strings")
        film = need(r, "film_id", str, where)
        items.append(GalleryItem(frame, str(root / frame), {"film_id": film, "character_ids": chars}))
    if not items:
        raise BenchmarkError(f"{gpath}: no gallery frames")
    check_files((it.path for it in items), str(gpath))
    gallery = Gallery("movienet-identity", items)  # raises on a duplicate frame
    frames = set(gallery.ids)
    queries, seen = [], set()
    for n, r in enumerate(read_jsonl(qpath), 1):
        where = f"{qpath} line {n}"
        qid = str(need(r, "query_id", (str, int), where))
        if qid in seen:
            raise BenchmarkError(f"{where}: duplicate query_id {qid!r}")
        seen.add(qid)
        ref = need(r, "reference_frame", str, where)
        if ref not in frames:
            raise BenchmarkError(f"{where}: reference_frame {ref!r} is not a frame of {gpath.name}")
        edit = need(r, "edit", str, where)
        if not edit.strip():
            raise BenchmarkError(f"{where}: 'edit' is empty")
        char = r.get("character_id")
        if char is not None and not isinstance(char, str):
            raise BenchmarkError(f"{where}: character_id should be a string or null")
        queries.append({"external_id": qid, "reference_id": ref, "edit_text": edit,
                        "meta": {"film_id": need(r, "film_id", str, where), "character_id": char or None}})
    if not queries:
        raise BenchmarkError(f"{qpath}: no queries")
    return queries, gallery


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
    """The MovieNet identity set from ROOT (one split)."""
    if split != "val":
        raise BenchmarkError(f"the MovieNet identity set has one split; use --split val, not {split!r}")
    return MovieNetBench(*load_movienet_queryset(root))
