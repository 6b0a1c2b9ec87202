"""FashionIQ (Wu et al., CVPR 2021), validation protocol as in CLIP4Cir / SEARLE.

Layout under ROOT::

    captions/cap.{dress,shirt,toptee}.val.json      [{candidate, target, captions: [c1, c2]}]
    image_splits/split.{dress,shirt,toptee}.val.json [name, ...]
    images/<name>.png

Each category ranks its own split gallery (the reference is not removed, as in the official code).
The two captions are cleaned as CLIP4Cir does (`strip('.?, ')`, first capitalised) and joined
with " and " in both orders; the two orders are composed separately and their queries averaged,
then normalised. Metrics: R@10 and R@50 per category and their mean over categories.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.gallery import Gallery, GalleryItem
from cir_core.metrics import recall_at_k

from .common import BenchmarkError, BenchmarkResult, ScoreOpts, check_files, compose, need, rank_queries, read_json

CATEGORIES = ("dress", "shirt", "toptee")
KS = (10, 50)


def join_captions(first: str, second: str) -> str:
    """CLIP4Cir's validation text: 'First caption and second caption'."""
    return f"{first.strip('.?, ').capitalize()} and {second.strip('.?, ')}"


@dataclass
class Category:
    name: str
    gallery: Gallery
    texts: list[list[str]]
    ref_rows: np.ndarray  # rows of [gallery; ref_gallery]
    target_rows: np.ndarray
    ref_gallery: Gallery  # references missing from the split gallery (usually none)


@dataclass
class FashionIQBench:
    categories: list[Category]
    split: str = "val"
    name: str = "fashioniq"
    protocol: str = 'caption orders: both, queries averaged (SEARLE); reference not removed'
    labelled: bool = True

    def galleries(self) -> dict[str, Gallery]:
        out = {}
        for c in self.categories:
            out[c.name] = c.gallery
            if len(c.ref_gallery):
                out[c.name + "-refs"] = c.ref_gallery
        return out

    def n_queries(self) -> int:
        return sum(len(c.texts) for c in self.categories)

    def evaluate_method(self, method, emb: dict[str, np.ndarray], opts: ScoreOpts) -> BenchmarkResult:
        metrics: dict[str, float] = {}
        top = {}
        for c in self.categories:
            g = emb[c.name]
            pool = np.concatenate([g, emb[c.name + "-refs"]]) if len(c.ref_gallery) else g
            refs = pool[c.ref_rows]
            q, q0 = compose(method, refs, c.texts)
            ranked = rank_queries(method, q, q0, refs, g, opts, None, max(KS)).ids
            r = recall_at_k(ranked, c.target_rows, [k for k in KS if k <= ranked.shape[1]])
            metrics.update({f"{c.name} {k}": v for k, v in r.items()})
            ids = c.gallery.ids
            top.update({f"{c.name}/{i}": [ids[j] for j in row] for i, row in enumerate(ranked)})
        for k in KS:
            vals = [metrics[f"{c.name} R@{k}"] for c in self.categories if f"{c.name} R@{k}" in metrics]
            if vals:
                metrics[f"avg R@{k}"] = float(np.mean(vals))
        if all(f"avg R@{k}" in metrics for k in KS):
            metrics["avg"] = float(np.mean([metrics[f"avg R@{k}"] for k in KS]))
        return BenchmarkResult(metrics, top=top)


def load_category(root: Path, cat: str) -> Category:
    split_path = root / "image_splits" / f"split.{cat}.val.json"
    names = read_json(split_path)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise BenchmarkError(f"{split_path}: expected a non-empty list of image names")
    img = lambda n: str(root / "images" / f"{n}.png")  # noqa: E731
    gallery = Gallery(f"fashioniq-{cat}-val", [GalleryItem(n, img(n), {}) for n in names])
    known = {n: i for i, n in enumerate(gallery.ids)}
    cap_path = root / "captions" / f"cap.{cat}.val.json"
    caps = read_json(cap_path)
    if not isinstance(caps, list) or not caps:
        raise BenchmarkError(f"{cap_path}: expected a non-empty list of triplets")
    texts, refs, targets = [], [], []
    for i, c in enumerate(caps):
        where = f"{cap_path} entry {i}"
        cand, tgt = need(c, "candidate", str, where), need(c, "target", str, where)
        two = need(c, "captions", list, where)
        if len(two) != 2 or not all(isinstance(x, str) for x in two):
            raise BenchmarkError(f"{where}: 'captions' should hold exactly 2 strings")
        if tgt not in known:
            raise BenchmarkError(f"{where}: target {tgt!r} is not in {split_path.name}")
        texts.append([join_captions(two[0], two[1]), join_captions(two[1], two[0])])
        refs.append(cand)
        targets.append(known[tgt])
    extra = [n for n in dict.fromkeys(refs) if n not in known]
    ref_gallery = Gallery(f"fashioniq-{cat}-val-refs", [GalleryItem(n, img(n), {}) for n in extra])
    check_files((it.path for it in gallery.items + ref_gallery.items), f"{root / 'images'}")
    pos = {**known, **{n: len(gallery) + i for i, n in enumerate(extra)}}
    return Category(cat, gallery, texts, np.array([pos[r] for r in refs], np.int64),
                    np.array(targets, np.int64), ref_gallery)


def load(root: str | Path, split: str = "val", categories: tuple[str, ...] = CATEGORIES) -> FashionIQBench:
    """FashionIQ validation (the only split with public targets) from ROOT, validated."""
    if split != "val":
        raise BenchmarkError(f"FashionIQ is evaluated on its val split (test targets are not public), not {split!r}")
    root = Path(root).expanduser()
    return FashionIQBench([load_category(root, c) for c in categories])
