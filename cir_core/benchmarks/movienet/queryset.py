"""MovieNet identity set: does the top of the ranking still show the reference's character?

Layout under ROOT (this project's set format; frame paths are relative to ROOT; the builder
`python -m cir_core.benchmarks.movienet build` writes it from MovieNet's release, docs/MOVIENET.md)::

    gallery.jsonl   one {"frame": "keyframes/tt0120338/shot_0012_img_1.jpg", "film_id": "tt0120338",
                         "character_ids": ["nm0000138", ...],
                         "cast": [{"pid": "nm0000138", "bbox": [x1, y1, x2, y2]}, {"pid": "others", ...}],
                         "resolution": [w, h]} per gallery frame ("cast" and "resolution" optional)
    queries.jsonl   one {"query_id", "reference_frame", "edit", "film_id", "character_id",
                         "character_box": [x1, y1, x2, y2], "character_name": "Jack Dawson",
                         "actor": "Leonardo DiCaprio"} per query (the last three optional)

`reference_frame` must be one of the gallery's frames (it is removed from its own ranking);
`character_id` may be null or "" when unknown: that query is ranked but not scored. A
`character_box` must be one of that character's boxes on the reference frame when the frame has
boxes; without it, the frame's only box of that character is used. Boxes are corners in the
frame's `resolution` (MovieNet's annotation convention), drawn on the reference wherever it is
shown (annotation, Compare, figures) so the person to follow is unambiguous.
Metrics: identity@1/5/10 = share of scored queries with a frame showing the reference's
character among the top 1/5/10, and identity@n, the number of scored queries.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.gallery import Gallery, GalleryItem
from cir_core.gallery_spec import GalleryContext, GallerySpec, OpenedGallery, register_opener
from cir_core.metrics import identity_at_k

from ..common import (
    TOP,
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    ScoreOpts,
    check_files,
    compose_queries,
    need,
    rank_queries,
    read_jsonl,
)
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
    root = Path(root).expanduser()
    gpath, qpath = root / "gallery.jsonl", root / "queries.jsonl"
    items = [_gallery_item(r, root, f"{gpath} line {n}") for n, r in enumerate(read_jsonl(gpath), 1)]
    if not items:
        raise BenchmarkError(f"{gpath}: no gallery frames")
    check_files((it.path for it in items if it.path is not None), str(gpath))  # (every frame has one)
    gallery = Gallery("movienet-identity", items)  # raises on a duplicate frame
    by_id = {it.id: it for it in items}
    queries, seen = [], set()
    for n, r in enumerate(read_jsonl(qpath), 1):
        q = _query(r, by_id, f"{qpath} line {n}", gpath.name)
        if q["external_id"] in seen:
            raise BenchmarkError(f"{qpath} line {n}: duplicate query_id {q['external_id']!r}")
        seen.add(q["external_id"])
        queries.append(q)
        m, ref = q["meta"], by_id[q["reference_id"]]
        if m.get("character_box") and "reference_character" not in ref.meta:
            ref.meta["reference_character"] = {"pid": m["character_id"], "name": m.get("character_name") or "",
                                               "box": m["character_box"]}
    if not queries:
        raise BenchmarkError(f"{qpath}: no queries")
    return queries, gallery


def _box(v: Any, where: str, key: str) -> list[float]:
    if not isinstance(v, list) or len(v) != 4 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                         for x in v) or v[2] <= v[0] or v[3] <= v[1]:
        raise BenchmarkError(f"{where}: key {key!r} should be [x1, y1, x2, y2] with x1 < x2, y1 < y2, got {v!r:.80}")
    return [float(x) for x in v]


def _gallery_item(r: dict, root: Path, where: str) -> GalleryItem:
    frame = need(r, "frame", str, where)
    chars = need(r, "character_ids", list, where)
    if not all(isinstance(c, str) and c for c in chars):
        raise BenchmarkError(f"{where}: character_ids should be a list of non-empty strings")
    meta: dict[str, Any] = {"film_id": need(r, "film_id", str, where), "character_ids": chars}
    if "cast" in r:
        cast = need(r, "cast", list, where)
        meta["cast"] = [{"pid": need(c, "pid", str, f"{where} cast #{i}"),
                         "bbox": _box(c.get("bbox") if isinstance(c, dict) else None, f"{where} cast #{i}", "bbox")}
                        for i, c in enumerate(cast)]
        res = need(r, "resolution", list, where)
        if len(res) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in res):
            raise BenchmarkError(f"{where}: key 'resolution' should be [width, height], got {res!r:.80}")
        meta["resolution"] = res
    return GalleryItem(frame, str(root / frame), meta)


def _query(r: dict, by_id: dict[str, GalleryItem], where: str, gallery_name: str) -> dict[str, Any]:
    qid = str(need(r, "query_id", (str, int), where))
    ref = need(r, "reference_frame", str, where)
    if ref not in by_id:
        raise BenchmarkError(f"{where}: reference_frame {ref!r} is not a frame of {gallery_name}")
    edit = need(r, "edit", str, where)
    if not edit.strip():
        raise BenchmarkError(f"{where}: 'edit' is empty")
    char = r.get("character_id")
    if char is not None and not isinstance(char, str):
        raise BenchmarkError(f"{where}: character_id should be a string or null")
    meta: dict[str, Any] = {"film_id": need(r, "film_id", str, where), "character_id": char or None}
    for key in ("character_name", "actor", "edit_type"):
        if r.get(key) is not None:
            meta[key] = need(r, key, str, where)
    boxes = [c["bbox"] for c in by_id[ref].meta.get("cast", ()) if char and c["pid"] == char]
    if r.get("character_box") is not None:
        if not char:
            raise BenchmarkError(f"{where}: 'character_box' needs a 'character_id'")
        box = _box(r["character_box"], where, "character_box")
        if "cast" in by_id[ref].meta and box not in boxes:
            raise BenchmarkError(f"{where}: 'character_box' {box} is not a box of {char!r} on {ref!r} "
                                 f"(its boxes there: {boxes or 'none'})")
        meta["character_box"] = box
    elif len(boxes) == 1:
        meta["character_box"] = boxes[0]
    return {"external_id": qid, "reference_id": ref, "edit_text": edit, "meta": meta}


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
