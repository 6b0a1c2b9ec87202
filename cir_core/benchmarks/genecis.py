"""GeneCIS (Vaze et al., CVPR 2023): four conditional-similarity tasks with per-query galleries.
The task files, image entries and their checks are the format's (`cir_core.formats.genecis`).

An attribute task's image entry is cropped as the official `datasets/vaw_dataset.py` does (the
box dilated by 0.7 and padded to a black square); an object task's image is used whole
(`datasets/coco_dataset.py`). Images are decoded as those loaders decode them: `PIL.Image.open`,
the crop and pad on the pixels as stored (no EXIF transposition), RGB last. The candidates are
[target] + gallery, so the target is candidate 0. Metrics: R@1/2/3 per task and the mean R@1
over the tasks evaluated. Every task file is required unless `subset=` names the tasks to
evaluate (the table's protocol line then says the mean is over those only).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from cir_core.errors import ImageLoadError
from cir_core.formats import genecis as genecis_format
from cir_core.formats.genecis import TASKS, GImage, GSample
from cir_core.gallery import Gallery, GalleryItem
from cir_core.imageio import open_as_stored, rgb_as_official
from cir_core.metrics import candidate_recall

from .common import (
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    ScoreOpts,
    StoredGallery,
    compose_queries,
    parse_subset,
    score_candidates,
)
from .registry import register_benchmark

DILATION = 0.7


def crop_box(bbox: list[float], width: int, height: int,
             dilate: float = DILATION) -> tuple[float, float, float, float]:
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
    if item.path is None:
        raise ImageLoadError(f"GeneCIS gallery item {item.id!r} has no image file")
    raw = open_as_stored(item.path)
    im = raw
    if "bbox" in item.meta:
        im = pad_square(raw.crop(crop_box(item.meta["bbox"], *raw.size)))
    out = rgb_as_official(im)
    raw.close()
    if size is not None:
        out.thumbnail((size, size))
    return out


def _item(image: GImage) -> GalleryItem:
    """A gallery item of an image entry; the crop is part of the pixels' identity: one cache row
    per (file, box)."""
    meta: dict = {} if image.bbox is None else {"bbox": image.bbox}
    st = image.path.stat()
    meta["fingerprint"] = (f"{image.path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{meta.get('bbox')}|"
                           f"{StoredGallery.DECODE}")
    return GalleryItem(image.key, str(image.path), meta)


@dataclass
class Task:
    name: str
    gallery: Gallery  # every distinct image/crop of the task
    texts: list[list[str]]
    ref_rows: np.ndarray
    cands: list[np.ndarray]  # per query: rows of [target, *gallery]


def task(name: str, samples: list[GSample]) -> Task:
    """A task as read: the gallery of its distinct images (crops), each query's candidates."""
    items: dict[str, GalleryItem] = {}

    def row(image: GImage) -> str:
        items.setdefault(image.key, _item(image))
        return image.key

    texts, refs, cands = [], [], []
    for s in samples:
        texts.append([s.condition])
        refs.append(row(s.reference))
        cands.append([row(s.target), *(row(g) for g in s.gallery)])
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
            for i, (s, cand) in enumerate(zip(scores, t.cands)):
                top[f"{t.name}/{i}"] = [ids[cand[j]] for j in np.argsort(-s, kind="stable")[:3]]
        metrics["mean R@1"] = float(np.mean([metrics[f"{t.name} R@1"] for t in self.tasks]))
        return BenchmarkResult(metrics, extra={"tasks": [t.name for t in self.tasks]}, top=top)


@register_benchmark("genecis", "GeneCIS: R@1/2/3 over each query's own gallery")
def load(root: str | Path, split: str = "val", subset: str | tuple[str, ...] | None = None) -> GeneCISBench:
    """The four GeneCIS tasks from ROOT, or the `subset` named ('focus_object,change_object');
    a task file that is missing is an error, naming it."""
    if split != "val":
        raise BenchmarkError(f"GeneCIS has one (zero-shot evaluation) split; use --split val, not {split!r}")
    chosen = parse_subset(subset, TASKS, "task")
    hint = "" if chosen else (" (mean R@1 is over all four tasks; to evaluate only some, name them: "
                              "--subset focus_object,change_object)")
    read = genecis_format.read(Path(root).expanduser(), split, chosen or TASKS, hint)
    return GeneCISBench([task(t, samples) for t, samples in read.items()], chosen is not None)
