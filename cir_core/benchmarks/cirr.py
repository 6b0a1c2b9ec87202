"""CIRR (Liu et al., ICCV 2021), the official rc2 files and protocol.

Two layouts are read (the annotation files are the `cirr_dataset` branch of Cuberick-Orion/CIRR,
the images NLVR2's)::

    official (the CIRR README):               SEARLE / CLIP4Cir / GeneCIS:
    ROOT/captions/cap.rc2.{val,test1}.json    ROOT/cirr/captions/cap.rc2.{val,test1}.json
    ROOT/image_splits/split.rc2.{...}.json    ROOT/cirr/image_splits/split.rc2.{...}.json
    ROOT/img_raw/dev/..., img_raw/test1/...   ROOT/dev/..., ROOT/test1/..., ROOT/train/...

The split file maps each image name to a path relative to the image folder
("./dev/dev-0-0-img0.png"). Images are decoded as the official loaders decode them (no EXIF
transposition). Recall@1/5/10/50 ranks the split's whole gallery with the reference removed;
Recall_subset@1/2/3 ranks the other members of the query's `img_set`. Official test1 captions have
no `target_hard`: no metrics, only the two server files (`--submission`); a test1 file whose
captions all carry `target_hard` (the world's export) is scored like val.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.gallery import Gallery, GalleryItem
from cir_core.metrics import recall_at_k, subset_ranking, subset_recall

from .common import (TOP, BenchmarkError, BenchmarkResult, Composed, Embedded, ScoreOpts, StoredGallery,
                     check_files, compose_queries, need, rank_queries, read_json)
from .registry import register_benchmark

VERSION = "rc2"
SPLITS = {"val": "val", "test": "test1", "test1": "test1"}
SUBSET_TOP = 3
OFFICIAL = "official (captions/, image_splits/, img_raw/)"
SEARLE = "SEARLE/CLIP4Cir (cirr/captions/, cirr/image_splits/, dev/ test1/ train/)"


@dataclass(frozen=True)
class Layout:
    """Where a CIRR root keeps its annotation files (`ann`) and the base of its image paths."""

    ann: Path
    images: Path
    name: str


def split_file(ann: Path, split: str) -> Path:
    return ann / "image_splits" / f"split.{VERSION}.{split}.json"


def find_layout(root: Path, split: str) -> Layout:
    """The layout of ROOT for `split`: the annotations in ROOT or ROOT/cirr, the images under the
    first of ann/img_raw, ann, ROOT, ann's parent that holds the split file's first image."""
    anns = [a for a in (root, root / "cirr") if split_file(a, split).is_file()]
    if not anns:
        raise BenchmarkError(
            f"{root}: no CIRR split file; expected {split_file(root, split).relative_to(root)} (official "
            f"layout, images in img_raw/) or {split_file(root / 'cirr', split).relative_to(root)} "
            f"(SEARLE/CLIP4Cir layout, images in dev/, test1/)")
    ann = anns[0]
    names = read_json(split_file(ann, split))
    if not isinstance(names, dict) or not names:
        raise BenchmarkError(f"{split_file(ann, split)}: expected a non-empty object {{image name: relative path}}")
    first = next(iter(names.values()))
    if not isinstance(first, str):
        raise BenchmarkError(f"{split_file(ann, split)}: key {next(iter(names))!r} should map to a relative path string")
    bases = list(dict.fromkeys((ann / "img_raw", ann, root, ann.parent)))
    for base in bases:
        if (base / first).is_file():
            if base == ann / "img_raw":
                name = OFFICIAL
            elif ann.name == "cirr" and base == ann.parent:
                name = SEARLE
            else:
                name = f"annotations in {ann}, images under {base}"
            return Layout(ann, base, name)
    raise BenchmarkError(f"{split_file(ann, split)}: its first image {first!r} is in none of "
                         + ", ".join(str(b) for b in bases))


def load_split_gallery(layout: Layout, split: str, name: str) -> Gallery:
    """The split's gallery from `image_splits/split.rc2.{split}.json`, in the file's order."""
    path = split_file(layout.ann, split)
    names = read_json(path)
    if not isinstance(names, dict) or not names:
        raise BenchmarkError(f"{path}: expected a non-empty object {{image name: relative path}}")
    items = []
    for k, rel in names.items():
        if not isinstance(rel, str):
            raise BenchmarkError(f"{path}: key {k!r} should map to a relative path string")
        items.append(GalleryItem(k, str((layout.images / rel).resolve()), {}))
    check_files((it.path for it in items), str(path))
    return StoredGallery(name, items)


def load_captions(ann: Path, split: str, gallery: Gallery) -> tuple[list[dict], bool]:
    """`captions/cap.rc2.{split}.json`, every name checked against the split's gallery, and
    whether it is labelled (val always; test1 when every entry has `target_hard`)."""
    path = ann / "captions" / f"cap.{VERSION}.{split}.json"
    caps = read_json(path)
    if not isinstance(caps, list) or not caps:
        raise BenchmarkError(f"{path}: expected a non-empty list of query objects")
    labelled = split == "val" or any(isinstance(c, dict) and "target_hard" in c for c in caps)
    known = set(gallery.ids)
    seen: set[int] = set()
    for i, c in enumerate(caps):
        where = f"{path} entry {i}"
        pid = need(c, "pairid", int, where)
        if pid in seen:
            raise BenchmarkError(f"{where}: duplicate pairid {pid}")
        seen.add(pid)
        need(c, "caption", str, where)
        members = need(need(c, "img_set", dict, where), "members", list, where + " img_set")
        names = [need(c, "reference", str, where), *members]
        if labelled:
            names.append(need(c, "target_hard", str, where))
        bad = [n for n in names if n not in known]
        if bad:
            raise BenchmarkError(f"{where} (pairid {pid}): {bad[0]!r} is not in image_splits/"
                                 f"split.{VERSION}.{split}.json")
    return caps, labelled


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
        ranked, sub = got.ids, subset_ranking(got.at_cols, self.members, self.ref_rows)
        metrics: dict[str, float] = {}
        if self.labelled:
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
    root = Path(root).expanduser()
    if split not in SPLITS:
        raise BenchmarkError(f"CIRR has splits val and test (test1), not {split!r}")
    s = SPLITS[split]
    layout = find_layout(root, s)
    gallery = load_split_gallery(layout, s, f"cirr-{s}")
    caps, labelled = load_captions(layout.ann, s, gallery)
    row = gallery.index_of
    width = max(len(c["img_set"]["members"]) for c in caps)
    members = np.full((len(caps), width), -1, np.int64)
    for i, c in enumerate(caps):
        members[i, : len(c["img_set"]["members"])] = [row(m) for m in c["img_set"]["members"]]
    return CIRRBench(
        split=s, gallery=gallery, pairids=[str(c["pairid"]) for c in caps],
        texts=[[c["caption"]] for c in caps],
        ref_rows=np.array([row(c["reference"]) for c in caps], np.int64),
        target_rows=np.array([row(c["target_hard"]) for c in caps], np.int64) if labelled else None,
        members=members, layout=layout.name)
