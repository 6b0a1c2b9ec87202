"""CIRCO (Baldrati et al., ICCV 2023), the official protocol; the files and their checks are the
format's (`cir_core.formats.circo`).

The gallery is every COCO 2017 unlabeled image, decoded as the official loaders decode them. The
edit text is `relative_caption`. mAP@K = Σ_{k≤K} P(k)·rel(k) / min(|GT|, K); also R@K of
`target_img_id`, and mAP@10 per `semantic_aspects` entry (`extra`), as CIRCO's
`src/evaluation.py` prints them. The test split gives only the server file `{query_id: [50 image
ids]}` (`--submission`); a test file whose entries all carry `gt_img_ids` (the world's export) is
scored like val.

Protocol (`protocol=`), because published code disagrees:

- `keep-reference` (default): the reference stays in the ranking and in the submission, as the
  CIRCO authors' own code does (miccunifi/SEARLE `src/validate.py` `circo_compute_val_metrics`,
  `src/generate_test_submission.py` `circo_generate_test_dict`); the CIRCO server scores what it
  is sent.
- `remove-reference`: the reference is removed from every ranking and submission (what this
  project did before; mAP can only rise, so such numbers are not comparable with published ones).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.formats import circo as circo_format
from cir_core.gallery import Gallery, GalleryItem
from cir_core.metrics import map_at_k, recall_at_k

from .common import (
    TOP,
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    ScoreOpts,
    StoredGallery,
    compose_queries,
    pick,
    rank_queries,
)
from .registry import register_benchmark

PROTOCOLS = {
    "keep-reference": "keep-reference: the reference stays in every ranking and submission (the CIRCO "
                      "authors' code: SEARLE validate.py / generate_test_submission.py)",
    "remove-reference": "remove-reference: the reference is removed from every ranking and submission (not the "
                        "authors' code; mAP can only rise: not comparable with published numbers)",
}
DEFAULT_PROTOCOL = "keep-reference"


@dataclass
class CIRCOBench:
    split: str
    gallery: Gallery
    query_ids: list[str]
    texts: list[list[str]]
    ref_rows: np.ndarray
    target_rows: np.ndarray | None
    gt_rows: list[list[int]] | None
    aspects: list[list[str]] | None = None
    reference: str = DEFAULT_PROTOCOL  # the protocol's name
    name: str = "circo"

    @property
    def protocol(self) -> str:
        return PROTOCOLS[self.reference] + "; mAP@K over gt_img_ids, R@K of target_img_id"

    @property
    def remove_reference(self) -> bool:
        return self.reference == "remove-reference"

    @property
    def labelled(self) -> bool:
        return self.gt_rows is not None

    def galleries(self) -> dict[str, Gallery]:
        return {"gallery": self.gallery}

    def n_queries(self) -> int:
        return len(self.query_ids)

    def compose(self, method, data: Embedded) -> Composed:
        return compose_queries(method, data.refs("gallery", self.ref_rows), self.texts)

    def score(self, method, c: Composed, data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        g = data.emb["gallery"]
        exclude = self.ref_rows if self.remove_reference else None
        ranked = rank_queries(method, c.q, c.q_empty, g[self.ref_rows], g, opts, exclude, TOP).ids
        metrics: dict[str, float] = {}
        extra: dict = {}
        if self.labelled:
            gt, targets = self.gt_rows, self.target_rows
            assert gt is not None and targets is not None  # a labelled split has both
            ks = [k for k in (5, 10, 25, 50) if k <= ranked.shape[1]]
            metrics = {**map_at_k(ranked, gt, ks), **recall_at_k(ranked, targets, ks)}
            if self.aspects and 10 <= ranked.shape[1]:
                by: dict[str, list[int]] = {}
                for i, asp in enumerate(self.aspects):
                    for a in asp:
                        by.setdefault(a, []).append(i)
                extra["semantic mAP@10"] = {
                    a: round(map_at_k(ranked[rows], [gt[i] for i in rows], [10])["mAP@10"], 4)
                    for a, rows in sorted(by.items())}
        ids = self.gallery.ids
        return BenchmarkResult(metrics, extra=extra, top={qid: [int(ids[j]) for j in r]
                                                          for qid, r in zip(self.query_ids, ranked)})

    def write_submission(self, res: BenchmarkResult, out: Path) -> list[Path]:
        refs = [int(self.gallery.ids[r]) for r in self.ref_rows]
        validate_submission(res.top, self.query_ids, refs, {int(i) for i in self.gallery.ids},
                            allow_reference=not self.remove_reference)
        Path(out).write_text(json.dumps(res.top))
        return [Path(out)]


def validate_submission(sub: dict, query_ids: list[str], references: list[int], gallery: set[int],
                        allow_reference: bool = True) -> None:
    """The server's rules: keys are all the split's query ids (0..n-1 as strings), each mapped to
    50 distinct gallery image ids (ints). Under `remove-reference` (allow_reference=False) no
    list may hold the query's own reference."""
    keys = set(sub)
    if keys != set(query_ids):
        missing = sorted(set(query_ids) - keys, key=int)
        extra = sorted(keys - set(query_ids))
        raise BenchmarkError(f"submission query ids: {len(missing)} missing (e.g. {missing[:3]}), "
                             f"{len(extra)} unknown (e.g. {extra[:3]})")
    for qid, ref in zip(query_ids, references):
        v = sub[qid]
        if (not isinstance(v, list) or len(v) != TOP or len(set(v)) != TOP
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            raise BenchmarkError(f"submission query {qid}: needs {TOP} distinct integer image ids")
        if not allow_reference and ref in v:
            raise BenchmarkError(f"submission query {qid}: lists its own reference {ref} "
                                 "(the remove-reference protocol)")
        bad = [x for x in v if x not in gallery]
        if bad:
            raise BenchmarkError(f"submission query {qid}: image {bad[0]} is not in the gallery")


@register_benchmark("circo", "CIRCO: mAP@K over every ground truth")
def load(root: str | Path, split: str = "val", protocol: str | None = None) -> CIRCOBench:
    """CIRCO `split` ('val' or 'test') from ROOT, validated; `protocol` keep-reference (default)
    or remove-reference."""
    root = Path(root).expanduser()
    if split not in circo_format.SPLITS:
        raise BenchmarkError(f"CIRCO has splits {circo_format.SPLITS}, not {split!r}")
    reference = pick(protocol, tuple(PROTOCOLS), "CIRCO --protocol", DEFAULT_PROTOCOL)
    images, queries, labelled = circo_format.read(root, split)
    gallery = StoredGallery("circo-unlabeled2017", [GalleryItem(str(i), p, {}) for i, p in images])
    row = {i: r for r, (i, _) in enumerate(images)}
    targets: list[int] = []
    gts: list[list[int]] = []
    aspects: list[list[str]] = []
    for q in queries if labelled else ():
        assert q.target is not None and q.gt is not None and q.aspects is not None  # a labelled split's
        targets.append(row[q.target])
        gts.append([row[x] for x in q.gt])
        aspects.append(q.aspects)
    return CIRCOBench(split, gallery, [str(q.id) for q in queries], [[q.text] for q in queries],
                      np.array([row[q.reference] for q in queries], np.int64),
                      np.array(targets, np.int64) if labelled else None, gts if labelled else None,
                      aspects if labelled else None, reference)
