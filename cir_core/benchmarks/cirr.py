"""CIRR (Liu et al., ICCV 2021), the official rc2 protocol; the files, both layouts and their
checks are the format's (`cir_core.formats.cirr`).

Images are decoded as the official loaders decode them (no EXIF transposition). Recall@1/5/10/50
ranks the split's whole gallery with the reference removed; Recall_subset@1/2/3 ranks the other
members of the query's `img_set`. Official test1 captions have no `target_hard`: no metrics, only
the two server files (`--submission`); a test1 file whose captions all carry `target_hard` (the
world's export) is scored like val.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.formats import cirr as cirr_format
from cir_core.formats.cirr import OFFICIAL, VERSION
from cir_core.gallery import Gallery, GalleryItem
from cir_core.metrics import recall_at_k, subset_ranking, subset_recall

from .common import (
    TOP,
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    ScoreOpts,
    StoredGallery,
    compose_queries,
    rank_queries,
)
from .registry import register_benchmark

SUBSET_TOP = 3


def split_gallery(images: dict[str, str], name: str) -> Gallery:
    """A split's gallery ({name: path}, in the split file's order), decoded as stored."""
    return StoredGallery(name, [GalleryItem(k, p, {}) for k, p in images.items()])


@dataclass
class CIRRBench:
    split: str
    gallery: Gallery
    pairids: list[str]
    texts: list[list[str]]
    ref_rows: np.ndarray
    target_rows: np.ndarray | None  # None on test1
    members: np.ndarray  # (Q, S) rows, -1 padded
    layout: str = OFFICIAL
    name: str = "cirr"
    protocol: str = ("rc2; R@K over the split gallery with the reference removed (CIRR's server, CLIP4Cir, "
                     "SEARLE); Rs@K over the img_set members but the reference")

    @property
    def labelled(self) -> bool:
        return self.target_rows is not None

    def galleries(self) -> dict[str, Gallery]:
        return {"gallery": self.gallery}

    def n_queries(self) -> int:
        return len(self.pairids)

    def compose(self, method, data: Embedded) -> Composed:
        return compose_queries(method, data.refs("gallery", self.ref_rows), self.texts)

    def score(self, method, c: Composed, data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        g = data.emb["gallery"]
        got = rank_queries(method, c.q, c.q_empty, g[self.ref_rows], g, opts, self.ref_rows, TOP, self.members)
        assert got.at_cols is not None  # the members' scores, asked for by passing them
        ranked, sub = got.ids, subset_ranking(got.at_cols, self.members, self.ref_rows)
        metrics: dict[str, float] = {}
        if self.target_rows is not None:  # labelled
            ks = [k for k in (1, 5, 10, 50) if k <= ranked.shape[1]]
            metrics = {**recall_at_k(ranked, self.target_rows, ks),
                       **subset_recall(sub, self.target_rows)}
        ids = self.gallery.ids
        top = {p: [ids[j] for j in r] for p, r in zip(self.pairids, ranked)}
        top_sub = {p: [ids[j] for j in r[:SUBSET_TOP] if j >= 0] for p, r in zip(self.pairids, sub)}
        return BenchmarkResult(metrics, top=top, aux={"subset": top_sub})

    def write_submission(self, res: BenchmarkResult, out: Path) -> list[Path]:
        """The two server files: OUT (recall, top 50) and OUT with `.subset` (recall_subset)."""
        out = Path(out)
        sub_path = out.with_name(out.stem + ".subset" + (out.suffix or ".json"))
        refs = [self.gallery.ids[r] for r in self.ref_rows]
        files = []
        for path, metric, top in ((out, "recall", res.top), (sub_path, "recall_subset", res.aux["subset"])):
            sub = {"version": VERSION, "metric": metric, **top}
            validate_submission(sub, self.pairids, refs, set(self.gallery.ids), metric)
            path.write_text(json.dumps(sub))
            files.append(path)
        return files


def validate_submission(sub: dict, pairids: list[str], references: list[str], gallery: set[str],
                        metric: str) -> None:
    """The server's rules: version rc2, the metric, every pairid (and nothing else) mapped to 50
    (recall) or 3 (recall_subset) distinct gallery names, never the query's reference."""
    n = {"recall": TOP, "recall_subset": SUBSET_TOP}.get(metric)
    if n is None:
        raise BenchmarkError(f"submission metric must be 'recall' or 'recall_subset', got {metric!r}")
    if sub.get("version") != VERSION or sub.get("metric") != metric:
        raise BenchmarkError(f"submission needs \"version\": \"{VERSION}\" and \"metric\": \"{metric}\"")
    keys = set(sub) - {"version", "metric"}
    missing = [p for p in pairids if p not in keys]
    extra = sorted(keys - set(pairids))
    if missing or extra:
        raise BenchmarkError(f"submission pairids: {len(missing)} missing (e.g. {missing[:3]}), "
                             f"{len(extra)} unknown (e.g. {extra[:3]})")
    for p, ref in zip(pairids, references):
        v = sub[p]
        if not isinstance(v, list) or len(v) != n or len(set(v)) != n:
            raise BenchmarkError(f"submission pairid {p}: needs {n} distinct names for {metric}, "
                                 f"got {len(v) if isinstance(v, list) else type(v).__name__}")
        if ref in v:
            raise BenchmarkError(f"submission pairid {p}: lists its own reference {ref!r}")
        bad = [x for x in v if x not in gallery]
        if bad:
            raise BenchmarkError(f"submission pairid {p}: {bad[0]!r} is not in the split's gallery")


@register_benchmark("cirr", "CIRR rc2: R@K with the reference removed, Rs@K over the img_set")
def load(root: str | Path, split: str = "val") -> CIRRBench:
    """CIRR `split` ('val', 'test'/'test1') from ROOT (either layout), validated."""
    files = cirr_format.read(Path(root).expanduser(), split)
    s, caps = files.split, files.captions
    gallery = split_gallery(files.images, f"cirr-{s}")
    row = gallery.index_of
    width = max(len(c["img_set"]["members"]) for c in caps)
    members = np.full((len(caps), width), -1, np.int64)
    for i, c in enumerate(caps):
        members[i, : len(c["img_set"]["members"])] = [row(m) for m in c["img_set"]["members"]]
    return CIRRBench(
        split=s, gallery=gallery, pairids=[str(c["pairid"]) for c in caps],
        texts=[[c["caption"]] for c in caps],
        ref_rows=np.array([row(c["reference"]) for c in caps], np.int64),
        target_rows=np.array([row(c["target_hard"]) for c in caps], np.int64) if files.labelled else None,
        members=members, layout=files.layout.name)
