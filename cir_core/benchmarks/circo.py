"""CIRCO (Baldrati et al., ICCV 2023), the official files and protocol.

Layout under ROOT (as in the CIRCO repository)::

    annotations/{val,test}.json   [{id, reference_img_id, relative_caption, shared_concept,
                                    target_img_id (val), gt_img_ids (val)}]
    COCO2017_unlabeled/annotations/image_info_unlabeled2017.json   (optional: {"images": [{id, file_name}]})
    COCO2017_unlabeled/unlabeled2017/000000243611.jpg ...

The gallery is every COCO 2017 unlabeled image (the info file's list, else the folder's
`{id:012d}.jpg` files), decoded as the official loaders decode them. The edit text is
`relative_caption`. mAP@K = Σ_{k≤K} P(k)·rel(k) / min(|GT|, K); also R@K of `target_img_id`, and
mAP@10 per `semantic_aspects` entry (`extra`), as CIRCO's `src/evaluation.py` prints them. The test
split gives only the server file `{query_id: [50 image ids]}` (`--submission`); a test file whose
entries all carry `gt_img_ids` (the world's export) is scored like val.

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

from cir_core.gallery import Gallery, GalleryItem
from cir_core.metrics import map_at_k, recall_at_k

from .common import (TOP, BenchmarkError, BenchmarkResult, Composed, Embedded, ScoreOpts, StoredGallery,
                     compose_queries, need, pick, rank_queries, read_json)
from .registry import register_benchmark

SPLITS = ("val", "test")
COCO = "COCO2017_unlabeled"
PROTOCOLS = {
    "keep-reference": "keep-reference: the reference stays in every ranking and submission (the CIRCO "
                      "authors' code: SEARLE validate.py / generate_test_submission.py)",
    "remove-reference": "remove-reference: the reference is removed from every ranking and submission (not the "
                        "authors' code; mAP can only rise: not comparable with published numbers)",
}
DEFAULT_PROTOCOL = "keep-reference"


def load_gallery(root: Path) -> Gallery:
    """The COCO 2017 unlabeled gallery; item ids are the image ids as strings."""
    folder = root / COCO / "unlabeled2017"
    info = root / COCO / "annotations" / "image_info_unlabeled2017.json"
    if info.is_file():
        images = need(read_json(info), "images", list, str(info))
        pairs = [(need(im, "id", int, f"{info} images[{i}]"), need(im, "file_name", str, f"{info} images[{i}]"))
                 for i, im in enumerate(images)]
    elif folder.is_dir():
        pairs = []
        for p in sorted(folder.glob("*.jpg")):
            if not p.stem.isdigit():
                raise BenchmarkError(f"{p}: COCO file names are the image id, e.g. 000000243611.jpg")
            pairs.append((int(p.stem), p.name))
    else:
        raise BenchmarkError(f"{folder}: folder not found (nor {info})")
    if not pairs:
        raise BenchmarkError(f"{folder}: no images")
    items = [GalleryItem(str(i), str(folder / f), {}) for i, f in pairs]
    missing = [it.path for it in items[:1] + items[-1:] if not Path(it.path).is_file()]
    if missing:  # 120k stats cost seconds; the cache reports any later missing file by name
        raise BenchmarkError(f"{info if info.is_file() else folder}: image file {missing[0]} not found")
    return StoredGallery("circo-unlabeled2017", items)


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
            ks = [k for k in (5, 10, 25, 50) if k <= ranked.shape[1]]
            metrics = {**map_at_k(ranked, self.gt_rows, ks), **recall_at_k(ranked, self.target_rows, ks)}
            if self.aspects and 10 <= ranked.shape[1]:
                by: dict[str, list[int]] = {}
                for i, asp in enumerate(self.aspects):
                    for a in asp:
                        by.setdefault(a, []).append(i)
                extra["semantic mAP@10"] = {
                    a: round(map_at_k(ranked[rows], [self.gt_rows[i] for i in rows], [10])["mAP@10"], 4)
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
    if split not in SPLITS:
        raise BenchmarkError(f"CIRCO has splits {SPLITS}, not {split!r}")
    reference = pick(protocol, tuple(PROTOCOLS), "CIRCO --protocol", DEFAULT_PROTOCOL)
    path = root / "annotations" / f"{split}.json"
    ann = read_json(path)
    if not isinstance(ann, list) or not ann:
        raise BenchmarkError(f"{path}: expected a non-empty list of query objects")
    gallery = load_gallery(root)
    labelled = split == "val" or any(isinstance(a, dict) and "gt_img_ids" in a for a in ann)
    known = {int(i): r for r, i in enumerate(gallery.ids)}

    def row(x: int, where: str) -> int:
        if x not in known:
            raise BenchmarkError(f"{where}: image {x} is not in the COCO 2017 unlabeled gallery")
        return known[x]

    qids, texts, refs, targets, gts, aspects = [], [], [], [], [], []
    for i, a in enumerate(ann):
        where = f"{path} entry {i}"
        qids.append(str(need(a, "id", int, where)))
        texts.append([need(a, "relative_caption", str, where)])
        need(a, "shared_concept", str, where)
        refs.append(row(need(a, "reference_img_id", int, where), where + " reference_img_id"))
        if labelled:
            targets.append(row(need(a, "target_img_id", int, where), where + " target_img_id"))
            gt = need(a, "gt_img_ids", list, where)
            if not gt:
                raise BenchmarkError(f"{where}: gt_img_ids is empty")
            gts.append([row(x, where + " gt_img_ids") for x in gt])
            asp = a.get("semantic_aspects", [])
            if not isinstance(asp, list) or not all(isinstance(x, str) for x in asp):
                raise BenchmarkError(f"{where}: key 'semantic_aspects' should be a list of strings")
            aspects.append(asp)
    if sorted(int(q) for q in qids) != list(range(len(qids))):
        raise BenchmarkError(f"{path}: query ids must be 0..{len(qids) - 1}, each once")
    return CIRCOBench(split, gallery, qids, texts, np.array(refs, np.int64),
                      np.array(targets, np.int64) if labelled else None, gts if labelled else None,
                      aspects if labelled else None, reference)
