"""GeneCIS (Vaze et al., CVPR 2023): the layout, its evaluation reader (`read`) and the writer of
a split in it.

Layout under ROOT::

    genecis/{focus_attribute,change_attribute,focus_object,change_object}.json   (or directly in ROOT)
    VG_100K_all/<image_id>.jpg      Visual Genome 1.2 (attribute tasks)
    val2017/<val_image_id:012d>.jpg COCO 2017 val (object tasks)

Each task file is a list of {"reference", "target", "condition", "gallery": [...]}; an image entry
is {"image_id", "instance_bbox": [x, y, w, h]} (attribute tasks, from VAW: `image_id` is a string
there, "2316576"; an int is taken too) or {"val_image_id": int} (object tasks). Supported: the
released JSON templates; not the older pickle templates.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import FormatError, need, read_json
from .registry import Format, register_format
from .writing import Folder, Split

TASKS = ("focus_attribute", "change_attribute", "focus_object", "change_object")


def task_path(root: Path, task: str) -> Path | None:
    """The task's file: ROOT/genecis/<task>.json, else ROOT/<task>.json; None when neither exists."""
    return next((p for p in (root / "genecis" / f"{task}.json", root / f"{task}.json") if p.is_file()), None)


def vg_file(image_id: str | int) -> str:
    return f"VG_100K_all/{image_id}.jpg"


def coco_file(image_id: int) -> str:
    return f"val2017/{image_id:012d}.jpg"


@dataclass(frozen=True)
class GImage:
    """An image entry: its key (one per (image, box)), file, and box [x, y, w, h] (attribute tasks)."""

    key: str
    path: Path
    bbox: list[float] | None = None


@dataclass(frozen=True)
class GSample:
    condition: str
    reference: GImage
    target: GImage
    gallery: list[GImage]


def _image_id(entry: Any, where: str) -> str:
    """VAW's `image_id`: a string of digits in the official files; an int is taken too."""
    iid = need(entry, "image_id", (str, int), where)
    if isinstance(iid, str) and not iid.strip().isdigit():
        raise FormatError(f"{where}: key 'image_id' should be a Visual Genome image id like \"2316576\", got {iid!r}")
    return str(iid).strip()


def read_image(root: Path, entry: Any, where: str, attribute: bool) -> GImage:
    """One image entry, checked, its file found."""
    if attribute:
        iid = _image_id(entry, where)
        box = need(entry, "instance_bbox", list, where)
        if len(box) != 4 or not all(isinstance(v, (int, float)) for v in box) or box[2] <= 0 or box[3] <= 0:
            raise FormatError(f"{where}: instance_bbox should be [x, y, w, h] with w, h > 0, got {box}")
        image = GImage(f"vg{iid}:" + ",".join(f"{v:g}" for v in box), root / vg_file(iid), [float(v) for v in box])
    else:
        iid = need(entry, "val_image_id", int, where)
        image = GImage(f"coco{iid}", root / coco_file(iid))
    if not image.path.is_file():
        raise FormatError(f"{where}: image file {image.path} not found")
    return image


def read_task(root: Path, path: Path, name: str) -> list[GSample]:
    """The evaluation reader of one task file: every sample and image entry checked."""
    samples = read_json(path)
    if not isinstance(samples, list) or not samples:
        raise FormatError(f"{path}: expected a non-empty list of samples")
    attribute = name.endswith("attribute")
    out = []
    for i, s in enumerate(samples):
        where = f"{path} sample {i}"
        condition = need(s, "condition", str, where)
        ref = read_image(root, need(s, "reference", dict, where), where + " reference", attribute)
        gal = need(s, "gallery", list, where)
        if not gal:
            raise FormatError(f"{where}: empty gallery")
        target = read_image(root, need(s, "target", dict, where), where + " target", attribute)
        out.append(GSample(condition, ref, target,
                           [read_image(root, g, f"{where} gallery[{j}]", attribute) for j, g in enumerate(gal)]))
    return out


def read(root: Path, split: str = "val", tasks: Sequence[str] = TASKS, hint: str = "") -> dict[str, list[GSample]]:
    """The evaluation reader: `tasks` (GeneCIS has one split, val), each a file that must exist
    (the error lists the missing ones, then `hint`)."""
    if split != "val":
        raise FormatError(f"GeneCIS has one (zero-shot evaluation) split; use --split val, not {split!r}")
    paths = {t: task_path(root, t) for t in tasks}
    missing = [t for t, p in paths.items() if p is None]
    if missing:
        raise FormatError(f"{root}: GeneCIS task file(s) not found: "
                          + ", ".join(f"genecis/{t}.json" for t in missing) + hint)
    return {t: read_task(root, p, t) for t, p in paths.items() if p is not None}


def write(split: Split, out: Folder) -> dict[str, Any]:
    """Two tasks: a query whose edit changes attributes only is change_attribute (a whole-image
    `instance_bbox`: the official dilated crop keeps it whole), any other change_object; the
    candidates are the query's subset (its target, and the rest as the `gallery`)."""
    ids = [j + 1 for j in range(len(split.pictures))]
    tasks: dict[str, list[dict]] = {"change_attribute": [], "change_object": []}
    files: dict[str, int] = {}  # relative image path -> picture
    box = [0, 0, out.size, out.size]

    def entry(j: int, attribute: bool) -> dict:
        if attribute:
            files[vg_file(ids[j])] = j
            return {"image_id": str(ids[j]), "instance_bbox": list(box)}
        files[coco_file(ids[j])] = j
        return {"val_image_id": ids[j]}

    for q in split.queries:
        assert q.target is not None
        task = "change_attribute" if q.attribute_only else "change_object"
        tasks[task].append({"condition": q.text,
                            "gallery": [entry(j, q.attribute_only) for j in q.subset if j != q.target],
                            "reference": entry(q.reference, q.attribute_only),
                            "target": entry(q.target, q.attribute_only)})
        out.queries[f"{task}/{len(tasks[task]) - 1}"] = q.source
    for task, samples in tasks.items():
        if samples:
            out.json(f"genecis/{task}.json", samples)
    out.items.update({str(x): p.source for x, p in zip(ids, split.pictures)})
    out.images([(rel, split.pictures[j].draw) for rel, j in files.items()], "genecis")
    written = [t for t, s in tasks.items() if s]
    out.notes.append(f"tasks {', '.join(written)} only (colour/size/shape edits are change_attribute, with a "
                     f"whole-image instance_bbox; the rest change_object): evaluate with --subset {','.join(written)}")
    return {"split_name": split.name, "queries": sum(len(s) for s in tasks.values()),
            "tasks": {t: len(s) for t, s in tasks.items()}, "images": len(files)}


register_format(Format("genecis", "GeneCIS: four task files over Visual Genome and COCO val images",
                       benchmark="genecis", read=read, write=write, order=40))
