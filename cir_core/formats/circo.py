"""CIRCO (Baldrati et al., ICCV 2023): the layout, its evaluation reader (`read`) and the writer of a
split in it.

Layout under ROOT (as in the CIRCO repository)::

    annotations/{val,test}.json   [{id, reference_img_id, relative_caption, shared_concept,
                                    target_img_id (val), gt_img_ids (val), semantic_aspects (val)}]
    COCO2017_unlabeled/annotations/image_info_unlabeled2017.json   (optional: {"images": [{id, file_name}]})
    COCO2017_unlabeled/unlabeled2017/000000243611.jpg ...

The gallery is every COCO 2017 unlabeled image: the info file's list, else the folder's
`{id:012d}.jpg` files. Query ids are 0..n-1. The official test file has no `target_img_id`,
`gt_img_ids` nor `semantic_aspects`; a test file whose entries carry `gt_img_ids` is labelled.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import FormatError, need, read_json
from .registry import Format, register_format
from .writing import Folder, Split

SPLITS = ("val", "test")
COCO = "COCO2017_unlabeled"


def info_file(root: Path) -> Path:
    return root / COCO / "annotations" / "image_info_unlabeled2017.json"


def image_file(image_id: int) -> str:
    """A COCO 2017 unlabeled image's file name: its id, 12 digits."""
    return f"{image_id:012d}.jpg"


def read_gallery(root: Path) -> list[tuple[int, str]]:
    """(image id, path) of the COCO 2017 unlabeled gallery, in the info file's (else the
    folder's sorted) order; the first and the last file checked to exist (a 120k-file stat costs
    seconds; the embedding cache names any other missing file)."""
    folder = root / COCO / "unlabeled2017"
    info = info_file(root)
    if info.is_file():
        images = need(read_json(info), "images", list, str(info))
        pairs = [(need(im, "id", int, f"{info} images[{i}]"), need(im, "file_name", str, f"{info} images[{i}]"))
                 for i, im in enumerate(images)]
    elif folder.is_dir():
        pairs = []
        for p in sorted(folder.glob("*.jpg")):
            if not p.stem.isdigit():
                raise FormatError(f"{p}: COCO file names are the image id, e.g. 000000243611.jpg")
            pairs.append((int(p.stem), p.name))
    else:
        raise FormatError(f"{folder}: folder not found (nor {info})")
    if not pairs:
        raise FormatError(f"{folder}: no images")
    out = [(i, str(folder / f)) for i, f in pairs]
    missing = [p for _, p in out[:1] + out[-1:] if not Path(p).is_file()]
    if missing:
        raise FormatError(f"{info if info.is_file() else folder}: image file {missing[0]} not found")
    return out


@dataclass(frozen=True)
class CIRCOQuery:
    id: int
    reference: int  # image ids
    text: str  # relative_caption (shared_concept is checked, not used)
    target: int | None = None  # the labelled fields, None when the split is not labelled
    gt: list[int] | None = None
    aspects: list[str] | None = None


def annotations_file(root: Path, split: str) -> Path:
    return root / "annotations" / f"{split}.json"


def read_annotations(path: Path) -> list:
    """`annotations/{split}.json` as a non-empty list (its entries are checked by `check_annotations`)."""
    ann = read_json(path)
    if not isinstance(ann, list) or not ann:
        raise FormatError(f"{path}: expected a non-empty list of query objects")
    return ann


def check_annotations(ann: list, path: Path, split: str, known: set[int]) -> tuple[list[CIRCOQuery], bool]:
    """The entries of `path`, every one checked (keys, types, every image id in the gallery
    `known`, ids 0..n-1), and whether they are labelled (val; test when one has gt_img_ids)."""
    labelled = split == "val" or any(isinstance(a, dict) and "gt_img_ids" in a for a in ann)

    def image(x: int, where: str) -> int:
        if x not in known:
            raise FormatError(f"{where}: image {x} is not in the COCO 2017 unlabeled gallery")
        return x

    out = []
    for i, a in enumerate(ann):
        where = f"{path} entry {i}"
        qid = need(a, "id", int, where)
        text = need(a, "relative_caption", str, where)
        need(a, "shared_concept", str, where)
        ref = image(need(a, "reference_img_id", int, where), where + " reference_img_id")
        if not labelled:
            out.append(CIRCOQuery(qid, ref, text))
            continue
        target = image(need(a, "target_img_id", int, where), where + " target_img_id")
        gt = need(a, "gt_img_ids", list, where)
        if not gt:
            raise FormatError(f"{where}: gt_img_ids is empty")
        gt = [image(x, where + " gt_img_ids") for x in gt]
        asp = a.get("semantic_aspects", [])
        if not isinstance(asp, list) or not all(isinstance(x, str) for x in asp):
            raise FormatError(f"{where}: key 'semantic_aspects' should be a list of strings")
        out.append(CIRCOQuery(qid, ref, text, target, gt, asp))
    if sorted(q.id for q in out) != list(range(len(out))):
        raise FormatError(f"{path}: query ids must be 0..{len(out) - 1}, each once")
    return out, labelled


def read(root: Path, split: str) -> tuple[list[tuple[int, str]], list[CIRCOQuery], bool]:
    """The evaluation reader: (gallery, queries, labelled) of CIRCO `split` ('val' or 'test')."""
    if split not in SPLITS:
        raise FormatError(f"CIRCO has splits {SPLITS}, not {split!r}")
    path = annotations_file(root, split)
    ann = read_annotations(path)  # named before the 120k-image gallery is listed
    gallery = read_gallery(root)
    queries, labelled = check_annotations(ann, path, split, {i for i, _ in gallery})
    return gallery, queries, labelled


def write(split: Split, out: Folder) -> dict[str, Any]:
    """The split's pictures as COCO images (ids 1..n, JPEG), each query's `gt_img_ids` its
    target first, then its other correct pictures by id; `semantic_aspects` its edit type."""
    s = split.name
    ids = [j + 1 for j in range(len(split.pictures))]
    files = [image_file(x) for x in ids]
    out.items.update({str(x): p.source for x, p in zip(ids, split.pictures)})
    out.json(f"{COCO}/annotations/image_info_unlabeled2017.json", {
        "info": {"description": f"cir_core.world {s} split, exported in the COCO 2017 unlabeled layout"},
        "licenses": [],
        "images": [{"file_name": f, "height": out.size, "width": out.size, "id": x} for x, f in zip(ids, files)]})
    ann = []
    for i, q in enumerate(split.queries):
        assert q.target is not None
        gt = [ids[q.target]] + sorted(ids[j] for j in q.gt if j != q.target)
        ann.append({"reference_img_id": ids[q.reference], "target_img_id": ids[q.target], "relative_caption": q.text,
                    "shared_concept": q.shared_concept, "gt_img_ids": gt, "id": i, "semantic_aspects": [q.edit_type]})
        out.queries[str(i)] = q.source
    out.json(f"annotations/{s}.json", ann)
    out.images([(f"{COCO}/unlabeled2017/{f}", p.draw) for f, p in zip(files, split.pictures)], "circo")
    if s == "test":
        out.notes.append("test annotations carry target_img_id, gt_img_ids and semantic_aspects (the world "
                         "knows them; the official test file does not)")
    out.notes.append("semantic_aspects = the world's edit type, not CIRCO's nine aspects; images are JPEG "
                     "(quality 95) as COCO's are, so embeddings differ slightly from the native render")
    return {"split_name": s, "queries": len(ann), "gallery": len(ids)}


register_format(Format("circo", "CIRCO: annotations over the COCO 2017 unlabeled images", benchmark="circo",
                       read=read, write=write, order=20))
