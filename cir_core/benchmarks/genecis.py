"""GeneCIS (Vaze et al., CVPR 2023): four conditional-similarity tasks with per-query galleries.

Layout under ROOT::

    genecis/{focus_attribute,change_attribute,focus_object,change_object}.json   (or directly in ROOT)
    VG_100K_all/<image_id>.jpg      Visual Genome 1.2 (attribute tasks)
    val2017/<val_image_id:012d>.jpg COCO 2017 val (object tasks)

Each task file is a list of {"reference", "target", "condition", "gallery": [...]}; an image entry
is {"image_id", "instance_bbox": [x, y, w, h]} (attribute tasks, from VAW: `image_id` is a string
there, "2316576"; an int is taken too; the box is cropped, dilated by 0.7 and padded to a black
square, as the official `datasets/vaw_dataset.py` does) or {"val_image_id": int} (object tasks:
the whole image, `datasets/coco_dataset.py`). Images are decoded as those loaders decode them:
`PIL.Image.open`, the crop and pad on the pixels as stored (no EXIF transposition), RGB last.
The candidates are [target] + gallery, so the target is candidate 0. Metrics: R@1/2/3 per task
and the mean R@1 over the tasks evaluated. Every task file is required unless `subset=` names the
tasks to evaluate (the table's protocol line then says the mean is over those only).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from cir_core.gallery import Gallery, GalleryItem
from cir_core.imageio import open_as_stored, rgb_as_official
from cir_core.metrics import candidate_recall

from .common import (BenchmarkError, BenchmarkResult, Composed, Embedded, ScoreOpts, StoredGallery,
                     compose_queries, need, parse_subset, read_json, score_candidates)
from .registry import register_benchmark

TASKS = ("focus_attribute", "change_attribute", "focus_object", "change_object")
DILATION = 0.7


def crop_box(bbox: list[float], width: int, height: int, dilate: float = DILATION) -> tuple[float, ...]:
    """The official crop (left, top, right, bottom): the box moved up-left by `dilate`·size and
    grown to (1 + dilate)·size, clipped to the image."""
    x, y, w, h = bbox
    left, top = max(0.0, x - dilate * w), max(0.0, y - dilate * h)
    return left, top, min(width, left + (1 + dilate) * w), min(height, top + (1 + dilate) * h)


def pad_square(im: Image.Image) -> Image.Image:
    """Centre `im` on a black square of its longer side, in its own mode, as the official
    `expand2square` does (background (0,) for mode L, else (0, 0, 0))."""
    w, h = im.size
    if w == h:
        return im
    out = Image.new(im.mode, (max(w, h), max(w, h)), (0,) if im.mode == "L" else (0, 0, 0))
    out.paste(im, (0, (w - h) // 2) if w > h else ((h - w) // 2, 0))
    return out


def _crop_image(item: GalleryItem, size: int | None) -> Image.Image:
    raw = open_as_stored(item.path)
    im = raw
    if "bbox" in item.meta:
        im = pad_square(raw.crop(crop_box(item.meta["bbox"], *raw.size)))
    out = rgb_as_official(im)
    raw.close()
    if size is not None:
        out.thumbnail((size, size))
    return out


def _image_id(entry, where: str) -> str:
    """VAW's `image_id`: a string of digits in the official files; an int is taken too."""
    iid = need(entry, "image_id", (str, int), where)
    if isinstance(iid, str) and not iid.strip().isdigit():
        raise BenchmarkError(f"{where}: key 'image_id' should be a Visual Genome image id like \"2316576\", got {iid!r}")
    return str(iid).strip()


def _item(root: Path, entry, where: str, attribute: bool) -> GalleryItem:
    if attribute:
        iid = _image_id(entry, where)
        box = need(entry, "instance_bbox", list, where)
        if len(box) != 4 or not all(isinstance(v, (int, float)) for v in box) or box[2] <= 0 or box[3] <= 0:
            raise BenchmarkError(f"{where}: instance_bbox should be [x, y, w, h] with w, h > 0, got {box}")
        path = root / "VG_100K_all" / f"{iid}.jpg"
        key = f"vg{iid}:" + ",".join(f"{v:g}" for v in box)
        meta = {"bbox": [float(v) for v in box]}
    else:
        iid = need(entry, "val_image_id", int, where)
        path, key, meta = root / "val2017" / f"{iid:012d}.jpg", f"coco{iid}", {}
    if not path.is_file():
        raise BenchmarkError(f"{where}: image file {path} not found")
    st = path.stat()  # the crop is part of the pixels' identity: one cache row per (file, box)
    meta["fingerprint"] = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{meta.get('bbox')}|{StoredGallery.DECODE}"
    return GalleryItem(key, str(path), meta)


@dataclass
class Task:
    name: str
    gallery: Gallery  # every distinct image/crop of the task
    texts: list[list[str]]
    ref_rows: np.ndarray
    cands: list[np.ndarray]  # per query: rows of [target, *gallery]


def load_task(root: Path, path: Path, name: str) -> Task:
    samples = read_json(path)
    if not isinstance(samples, list) or not samples:
        raise BenchmarkError(f"{path}: expected a non-empty list of samples")
    attribute = name.endswith("attribute")
    items: dict[str, GalleryItem] = {}

    def row(entry, where: str) -> str:
        it = _item(root, entry, where, attribute)
        items.setdefault(it.id, it)
        return it.id

    texts, refs, cands = [], [], []
    for i, s in enumerate(samples):
        where = f"{path} sample {i}"
        texts.append([need(s, "condition", str, where)])
        refs.append(row(need(s, "reference", dict, where), where + " reference"))
        gal = need(s, "gallery", list, where)
        if not gal:
            raise BenchmarkError(f"{where}: empty gallery")
        cands.append([row(need(s, "target", dict, where), where + " target"),
                      *(row(g, f"{where} gallery[{j}]") for j, g in enumerate(gal))])
    gallery = Gallery(f"genecis-{name}", list(items.values()), image_fn=_crop_image)
    pos = {k: i for i, k in enumerate(items)}
    return Task(name, gallery, texts, np.array([pos[r] for r in refs], np.int64),
                [np.array([pos[c] for c in cs], np.int64) for cs in cands])


@dataclass
class GeneCISBench:
    tasks: list[Task]
    subset: bool = False  # True: the user chose the tasks
    split: str = "val"
    name: str = "genecis"
    labelled: bool = True

    @property
    def protocol(self) -> str:
        names = ", ".join(t.name for t in self.tasks)
        which = (f"subset of tasks: {names} (mean R@1 over these only)" if self.subset
                 else f"tasks: {names}")
        return ("candidates = [target] + gallery per query; attribute crops as the official VAW loader "
                f"(dilation 0.7, black square pad, pixels as stored); {which}")

    def galleries(self) -> dict[str, Gallery]:
        return {t.name: t.gallery for t in self.tasks}

    def n_queries(self) -> int:
        return sum(len(t.texts) for t in self.tasks)

    def compose(self, method, data: Embedded) -> dict[str, Composed]:
        return {t.name: compose_queries(method, data.refs(t.name, t.ref_rows), t.texts) for t in self.tasks}

    def score(self, method, composed: dict[str, Composed], data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        metrics: dict[str, float] = {}
        top = {}
        for t in self.tasks:
            g, c = data.emb[t.name], composed[t.name]
            scores = score_candidates(method, c.q, c.q_empty, g[t.ref_rows], g, t.cands, opts)
            # Galleries are all the same length within a task in the released files; pad if not.
            width = max(len(s) for s in scores)
            mat = np.full((len(scores), width), -np.inf)
            for i, s in enumerate(scores):
                mat[i, : len(s)] = s
            metrics.update({f"{t.name} {k}": v for k, v in candidate_recall(mat).items()})
            ids = t.gallery.ids
            for i, (s, c) in enumerate(zip(scores, t.cands)):
                top[f"{t.name}/{i}"] = [ids[c[j]] for j in np.argsort(-s, kind="stable")[:3]]
        metrics["mean R@1"] = float(np.mean([metrics[f"{t.name} R@1"] for t in self.tasks]))
        return BenchmarkResult(metrics, extra={"tasks": [t.name for t in self.tasks]}, top=top)


def task_path(root: Path, task: str) -> Path | None:
    return next((p for p in (root / "genecis" / f"{task}.json", root / f"{task}.json") if p.is_file()), None)


@register_benchmark("genecis", "GeneCIS: R@1/2/3 over each query's own gallery")
def load(root: str | Path, split: str = "val", subset: str | tuple[str, ...] | None = None) -> GeneCISBench:
    """The four GeneCIS tasks from ROOT, or the `subset` named ('focus_object,change_object');
    a task file that is missing is an error, naming it."""
    if split != "val":
        raise BenchmarkError(f"GeneCIS has one (zero-shot evaluation) split; use --split val, not {split!r}")
    root = Path(root).expanduser()
    chosen = parse_subset(subset, TASKS, "task")
    tasks = chosen or TASKS
    paths = {t: task_path(root, t) for t in tasks}
    missing = [t for t, p in paths.items() if p is None]
    if missing:
        hint = "" if chosen else (" (mean R@1 is over all four tasks; to evaluate only some, name them: "
                                  "--subset focus_object,change_object)")
        raise BenchmarkError(f"{root}: GeneCIS task file(s) not found: "
                             + ", ".join(f"genecis/{t}.json" for t in missing) + hint)
    return GeneCISBench([load_task(root, paths[t], t) for t in tasks], chosen is not None)
