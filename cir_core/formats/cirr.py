"""CIRR (Liu et al., ICCV 2021), rc2: the layout, its readers (evaluation: `read`; training:
`read_train`, `data=cirr:ROOT`) and the writers of a split in it.

Two layouts are read (the annotation files are the `cirr_dataset` branch of Cuberick-Orion/CIRR,
the images NLVR2's)::

    official (the CIRR README):                     SEARLE / CLIP4Cir / GeneCIS:
    ROOT/captions/cap.rc2.{train,val,test1}.json    ROOT/cirr/captions/cap.rc2.{...}.json
    ROOT/image_splits/split.rc2.{...}.json          ROOT/cirr/image_splits/split.rc2.{...}.json
    ROOT/img_raw/dev/..., img_raw/train/34/...      ROOT/dev/..., ROOT/test1/..., ROOT/train/...

The split file maps each image name to a path relative to the image folder
("./dev/dev-0-0-img0.png"); the image folder is the first of img_raw/, the annotation folder,
ROOT, the annotation folder's parent that holds the split's first image. Captions are
`[{pairid, reference, target_hard, target_soft, caption, img_set: {id, members, reference_rank,
target_rank}}]`; the official test1 file has no `target_hard` (nor `target_soft`, `target_rank`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import FormatError, Triplet, check_files, need, read_json
from .registry import Format, register_format
from .writing import Folder, Split

VERSION = "rc2"
SPLITS = {"val": "val", "test": "test1", "test1": "test1"}  # the evaluated splits, by their rc2 names
IMAGES = "img_raw"  # the official layout's image folder
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


def captions_file(ann: Path, split: str) -> Path:
    return ann / "captions" / f"cap.{VERSION}.{split}.json"


def _split_names(path: Path) -> dict:
    names = read_json(path)
    if not isinstance(names, dict) or not names:
        raise FormatError(f"{path}: expected a non-empty object {{image name: relative path}}")
    return names


def find_layout(root: Path, split: str) -> Layout:
    """The layout of ROOT for `split` (an rc2 name: train, val, test1): the annotations in ROOT or
    ROOT/cirr, the images under the first of ann/img_raw, ann, ROOT, ann's parent that holds the
    split file's first image."""
    anns = [a for a in (root, root / "cirr") if split_file(a, split).is_file()]
    if not anns:
        raise FormatError(
            f"{root}: no CIRR split file; expected {split_file(root, split).relative_to(root)} (official "
            f"layout, images in {IMAGES}/) or {split_file(root / 'cirr', split).relative_to(root)} "
            f"(SEARLE/CLIP4Cir layout, images in dev/, test1/)")
    ann = anns[0]
    names = _split_names(split_file(ann, split))
    first = next(iter(names.values()))
    if not isinstance(first, str):
        raise FormatError(f"{split_file(ann, split)}: key {next(iter(names))!r} should map to a relative path string")
    bases = list(dict.fromkeys((ann / IMAGES, ann, root, ann.parent)))
    for base in bases:
        if (base / first).is_file():
            if base == ann / IMAGES:
                name = OFFICIAL
            elif ann.name == "cirr" and base == ann.parent:
                name = SEARLE
            else:
                name = f"annotations in {ann}, images under {base}"
            return Layout(ann, base, name)
    raise FormatError(f"{split_file(ann, split)}: its first image {first!r} is in none of "
                      + ", ".join(str(b) for b in bases))


def read_images(layout: Layout, split: str) -> dict[str, str]:
    """{image name: absolute path} of `image_splits/split.rc2.{split}.json`, in the file's order;
    every file checked to exist."""
    path = split_file(layout.ann, split)
    out = {}
    for k, rel in _split_names(path).items():
        if not isinstance(rel, str):
            raise FormatError(f"{path}: key {k!r} should map to a relative path string")
        out[k] = str((layout.images / rel).resolve())
    check_files(out.values(), str(path))
    return out


def read_captions(ann: Path, split: str, known: set[str] | dict[str, Any],
                  labelled: bool | None = None) -> tuple[list[dict], bool]:
    """`captions/cap.rc2.{split}.json`, every entry checked (keys, types, unique pairids, every
    image name in the split's images `known`), and whether it is labelled (`labelled` None: val
    always, another split when an entry has `target_hard`; True: every entry needs one)."""
    path = captions_file(ann, split)
    caps = read_json(path)
    if not isinstance(caps, list) or not caps:
        raise FormatError(f"{path}: expected a non-empty list of query objects")
    if labelled is None:
        labelled = split == "val" or any(isinstance(c, dict) and "target_hard" in c for c in caps)
    seen: set[int] = set()
    for i, c in enumerate(caps):
        where = f"{path} entry {i}"
        pid = need(c, "pairid", int, where)
        if pid in seen:
            raise FormatError(f"{where}: duplicate pairid {pid}")
        seen.add(pid)
        need(c, "caption", str, where)
        members = need(need(c, "img_set", dict, where), "members", list, where + " img_set")
        names = [("reference", need(c, "reference", str, where)),
                 *((f"img_set.members[{j}]", m) for j, m in enumerate(members))]
        if labelled:
            names.append(("target_hard", need(c, "target_hard", str, where)))
        bad = [(k, n) for k, n in names if n not in known]
        if bad:
            raise FormatError(f"{where} (pairid {pid}): {bad[0][0]} {bad[0][1]!r} is not in image_splits/"
                              f"split.{VERSION}.{split}.json")
    return caps, labelled


@dataclass(frozen=True)
class CIRRFiles:
    """An evaluated split as read: its layout, images by name and validated captions."""

    layout: Layout
    split: str  # the rc2 name
    images: dict[str, str]
    captions: list[dict]
    labelled: bool


def read(root: Path, split: str) -> CIRRFiles:
    """The evaluation reader: CIRR `split` ('val', 'test'/'test1') from ROOT (either layout)."""
    if split not in SPLITS:
        raise FormatError(f"CIRR has splits val and test (test1), not {split!r}")
    s = SPLITS[split]
    layout = find_layout(root, s)
    images = read_images(layout, s)
    caps, labelled = read_captions(layout.ann, s, images)
    return CIRRFiles(layout, s, images, caps, labelled)


def read_train(root: Path, image_root: str | None = None) -> list[Triplet]:
    """The training reader (`data=cirr:ROOT`): the train split's (reference, caption, target_hard)."""
    layout = find_layout(root, "train")
    images = read_images(layout, "train")
    caps, _ = read_captions(layout.ann, "train", images, labelled=True)
    return [Triplet(images[c["reference"]], c["reference"], c["caption"], target_image=images[c["target_hard"]],
                    target_key=c["target_hard"]) for c in caps]


# -- writing -------------------------------------------------------------------------------------
def gallery_names(split: str, n: int) -> list[str]:
    """The names of an evaluated split's `n` images as written (`dev-7-0-img0`), NLVR2-shaped."""
    folder = "dev" if SPLITS[split] == "val" else SPLITS[split]
    return [f"{folder}-{i}-0-img0" for i in range(n)]


def train_names(i: int) -> tuple[str, str]:
    """The names of query i's reference and target in a written train split."""
    return f"train-{i}-0-img0", f"train-{i}-1-img1"


def write(split: Split, out: Folder) -> dict[str, Any]:
    """A val or test split: every picture is a gallery image; `img_set.members` = the reference
    plus the query's subset (target and hard distractors), so Recall_subset ranks that subset."""
    s = SPLITS[split.name]
    folder = "dev" if s == "val" else s
    names = gallery_names(split.name, len(split.pictures))
    out.items.update({n: p.source for n, p in zip(names, split.pictures)})
    out.json(f"image_splits/split.{VERSION}.{s}.json", {n: f"./{folder}/{n}.png" for n in names})
    caps = []
    for i, q in enumerate(split.queries):
        assert q.target is not None
        members = [names[q.reference]] + [names[j] for j in q.subset]
        caps.append({"pairid": i, "reference": names[q.reference], "target_hard": names[q.target],
                     "target_soft": {names[q.target]: 1.0}, "caption": q.text,
                     "img_set": {"id": i, "members": members, "reference_rank": 0,
                                 "target_rank": members.index(names[q.target])}})
        out.queries[str(i)] = q.source
    out.json(f"captions/cap.{VERSION}.{s}.json", caps)
    out.images([(f"{IMAGES}/{folder}/{n}.png", p.draw) for n, p in zip(names, split.pictures)], "cirr")
    if s == "test1":
        out.notes.append("test1 captions carry target_hard and target_soft (the world knows them; "
                         "the official test1 file does not)")
    out.notes.append("img_set.members = the reference + the world's subset of six (CIRR's: the reference + five)")
    return {"split_name": s, "queries": len(caps), "gallery": len(names)}


def write_train(split: Split, out: Folder) -> dict[str, Any]:
    """A train split from queries with their own pictures: query i's reference `train-i-0-img0`
    and target `train-i-1-img1`, in numbered folders as CIRR's train images are."""
    names, jobs, caps = {}, [], []
    for i, q in enumerate(split.queries):
        assert q.target is not None
        ref, tgt = train_names(i)
        for name, pic in ((ref, split.pictures[q.reference]), (tgt, split.pictures[q.target])):
            names[name] = f"./train/{i % 100}/{name}.png"
            jobs.append((f"{IMAGES}/{names[name][2:]}", pic.draw))
        out.items.update({ref: split.pictures[q.reference].source, tgt: split.pictures[q.target].source})
        caps.append({"pairid": i, "reference": ref, "target_hard": tgt, "target_soft": {tgt: 1.0},
                     "caption": q.text, "img_set": {"id": i, "members": [ref, tgt], "reference_rank": 0,
                                                    "target_rank": 1}})
        out.queries[str(i)] = q.source
    out.json(f"image_splits/split.{VERSION}.train.json", names)
    out.json(f"captions/cap.{VERSION}.train.json", caps)
    out.images(jobs, "cirr train")
    out.notes.append("train: the training stream's queries, each with its own reference and target "
                     "render; img_set.members = the pair (the stream has no subsets)")
    return {"split_name": "train", "queries": len(caps), "gallery": len(names)}


register_format(Format("cirr", "CIRR rc2: captions, image splits, NLVR2 images (either layout)", benchmark="cirr",
                       read=read, read_train=read_train, write=write, write_train=write_train, order=10))
