"""One writer per format. Each takes a split of the world and lays it out as the format's release
does; `export` runs one and writes `world_export.json` (the provenance: world split, item and
query ids behind every exported name) beside the files.

How the world maps onto each format (docs/WORLD.md, "Exports"):

- every gallery item of the split is one image; a query's reference and target are gallery items;
  its edit text is the caption / relative caption / condition / edit;
- CIRR `img_set.members` is the reference plus the query's subset of six (the target and its five
  hard distractors), so Recall_subset ranks exactly the world's subset;
- CIRCO `gt_img_ids` are the exact-key matches of the target (`gt_sets`), the target first;
- GeneCIS candidates are the subset: the target, and the five distractors as the `gallery`;
- MovieNet's character ids are the world's character names;
- the world knows every target, so test files carry them too (the official test files do not);
- the train split (itt, cirr, lcirr) is the training stream `query_stream(0)`: each query's own
  reference and target renders, as the native trainers see them.
"""
from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from PIL import Image

from cir_core.errors import InputError
from cir_core.inputs import MAX_EDIT_CHARS, collapse_whitespace

from ..benchmark import WorldBenchmark, build_benchmark
from ..data import WorldQuery, query_stream
from ..language import edit_text
from ..render import RENDER_VERSION, render
from ..spec import identity_look

FORMATS = ("cirr", "circo", "fashioniq", "genecis", "lcirr", "movienet", "itt", "movienet-release")
SPLITS = ("test", "val", "train")
DEFAULT_N = {"test": 1000, "val": 500, "train": 1000}  # the world benchmark's defaults (train: the stream)
TRAIN_FORMATS = ("itt", "cirr", "lcirr")  # the formats whose train split a trainer reads (data=)
DEFAULT_SIZE = 64
CATEGORIES = ("dress", "shirt", "toptee")
ITT_TYPES = ("attribute", "spatial", "scene", "two", "short")  # training/itt/schema.py EDIT_TYPES
ITT_MAX_NEGATIVES = 8  # training/itt/schema.py MAX_NEGATIVES
ATTRIBUTE_OPS = frozenset({"colour", "size", "shape"})  # GeneCIS change_attribute; the rest change_object
HATS = {"top hat": "a top hat", "crown": "a crown", "horns": "horns", "antenna": "an antenna"}
PROVENANCE = "world_export.json"


class ExportError(InputError):
    """A bad export request: unknown format or split, a folder that is not empty."""


@dataclass
class Out:
    """The export folder: JSON, JSON lines and rendered images, counted; the id maps."""

    root: Path
    size: int
    progress: bool
    n_images: int = 0
    items: dict[str, str] = field(default_factory=dict)  # exported image id -> world item id
    queries: dict[str, str] = field(default_factory=dict)  # exported query id -> world query id
    notes: list[str] = field(default_factory=list)

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def json(self, rel: str, obj: Any) -> None:
        self.path(rel).write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")

    def jsonl(self, rel: str, rows: Iterable[dict]) -> None:
        self.path(rel).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    def images(self, jobs: Sequence[tuple[str, Callable[[], Image.Image]]], what: str) -> None:
        """Render and save each (relative path, draw) job; PNG or JPEG (quality 95) by suffix."""
        it: Iterable = jobs
        if self.progress:
            from ...progress import bar

            it = bar(jobs, unit="image", desc=f"rendering {what}")
        for rel, draw in it:
            img = draw()
            if rel.endswith(".png"):
                img.save(self.path(rel), format="PNG")
            else:
                img.save(self.path(rel), format="JPEG", quality=95)
            self.n_images += 1


def _draw(bench: WorldBenchmark, row: int, size: int) -> Callable[[], Image.Image]:
    return lambda: bench.items[row].image(size)


def _sentence(clause: str) -> str:
    return clause[0].upper() + clause[1:] + "."


def second_caption(q: WorldQuery) -> str:
    """Another annotator's wording of the same edits (FashionIQ has two captions per triplet):
    the same structure as the query's text, each edit rephrased with a rng of its own."""
    rng = random.Random(f"second-caption:{q.query_id}")
    for _ in range(8):
        if q.edit_type == "long":
            text = " ".join(_sentence(edit_text(e, rng)) for e in q.edits)
        elif len(q.edits) == 2:
            text = _sentence(f"{edit_text(q.edits[0], rng)} and {edit_text(q.edits[1], rng)}")
        elif q.edit_type == "short":
            text = edit_text(q.edits[0], rng, short=True)
        else:
            text = _sentence(edit_text(q.edits[0], rng))
        if text != q.text:
            return text
    return text


def shared_concept(bench: WorldBenchmark, row: int) -> str:
    """What the reference and the target share (CIRCO's `shared_concept`): the character."""
    body, hat = identity_look(bench.items[row].scene.character.identity)
    return f"a {body} figure with {HATS[hat]}"


# -- CIRR and L-CIRR ---------------------------------------------------------------------------
def export_cirr(bench: WorldBenchmark, out: Out, split: str) -> dict[str, Any]:
    s = {"val": "val", "test": "test1"}[split]
    folder = "dev" if s == "val" else s
    names = [f"{folder}-{i}-0-img0" for i in range(len(bench.items))]
    out.items.update({n: it.item_id for n, it in zip(names, bench.items)})
    out.json(f"image_splits/split.rc2.{s}.json", {n: f"./{folder}/{n}.png" for n in names})
    caps = []
    for i, q in enumerate(bench.queries):
        ref, tgt, sub = bench.reference_idx[i], bench.target_idx[i], bench.subsets[i]
        members = [names[ref]] + [names[j] for j in sub]
        caps.append({"pairid": i, "reference": names[ref], "target_hard": names[tgt],
                     "target_soft": {names[tgt]: 1.0}, "caption": q.text,
                     "img_set": {"id": i, "members": members, "reference_rank": 0,
                                 "target_rank": members.index(names[tgt])}})
        out.queries[str(i)] = q.query_id
    out.json(f"captions/cap.rc2.{s}.json", caps)
    out.images([(f"img_raw/{folder}/{n}.png", _draw(bench, j, out.size)) for j, n in enumerate(names)], "cirr")
    if s == "test1":
        out.notes.append("test1 captions carry target_hard and target_soft (the world knows them; "
                         "the official test1 file does not)")
    out.notes.append("img_set.members = the reference + the world's subset of six (CIRR's: the reference + five)")
    return {"split_name": s, "queries": len(caps), "gallery": len(names)}


def export_cirr_train(queries: list[WorldQuery], out: Out) -> dict[str, Any]:
    """CIRR's train split from the training stream: query i's reference `train-i-0-img0` and
    target `train-i-1-img1` (their own renders), images in numbered folders as CIRR's are."""
    names, jobs, caps = {}, [], []
    for i, q in enumerate(queries):
        ref, tgt = f"train-{i}-0-img0", f"train-{i}-1-img1"
        for name, scene, seed in ((ref, q.reference, q.ref_seed), (tgt, q.target, q.target_seed)):
            names[name] = f"./train/{i % 100}/{name}.png"
            jobs.append((f"img_raw/{names[name][2:]}",
                         lambda scene=scene, seed=seed: render(scene, out.size, seed)))
        out.items.update({ref: f"reference of {q.query_id}", tgt: f"target of {q.query_id}"})
        caps.append({"pairid": i, "reference": ref, "target_hard": tgt, "target_soft": {tgt: 1.0},
                     "caption": q.text, "img_set": {"id": i, "members": [ref, tgt], "reference_rank": 0,
                                                    "target_rank": 1}})
        out.queries[str(i)] = q.query_id
    out.json("image_splits/split.rc2.train.json", names)
    out.json("captions/cap.rc2.train.json", caps)
    out.images(jobs, "cirr train")
    out.notes.append("train: the training stream's queries, each with its own reference and target "
                     "render; img_set.members = the pair (the stream has no subsets)")
    return {"split_name": "train", "queries": len(caps), "gallery": len(names)}


def export_lcirr_train(queries: list[WorldQuery], out: Out) -> dict[str, Any]:
    summary = export_cirr_train(queries, out)
    out.jsonl("lcirr/train.jsonl", ({"pairid": i, "reference": f"train-{i}-0-img0", "target": f"train-{i}-1-img1",
                                     "text": q.text} for i, q in enumerate(queries)))
    return summary


def export_lcirr(bench: WorldBenchmark, out: Out, split: str) -> dict[str, Any]:
    summary = export_cirr(bench, out, split)
    s = summary["split_name"]
    names = {w: n for n, w in out.items.items()}
    rows = [{"pairid": i, "reference": names[bench.items[bench.reference_idx[i]].item_id],
             "target": names[bench.items[bench.target_idx[i]].item_id], "text": q.text}
            for i, q in enumerate(bench.queries)]
    out.jsonl(f"lcirr/{s}.jsonl", rows)
    return summary


# -- CIRCO -------------------------------------------------------------------------------------
def export_circo(bench: WorldBenchmark, out: Out, split: str) -> dict[str, Any]:
    ids = [j + 1 for j in range(len(bench.items))]
    files = [f"{x:012d}.jpg" for x in ids]
    out.items.update({str(x): it.item_id for x, it in zip(ids, bench.items)})
    out.json("COCO2017_unlabeled/annotations/image_info_unlabeled2017.json", {
        "info": {"description": f"cir_core.world {split} split, exported in the COCO 2017 unlabeled layout"},
        "licenses": [],
        "images": [{"file_name": f, "height": out.size, "width": out.size, "id": x} for x, f in zip(ids, files)]})
    gts = bench.gt_sets()
    ann = []
    for i, q in enumerate(bench.queries):
        ref, tgt = bench.reference_idx[i], bench.target_idx[i]
        gt = [ids[tgt]] + sorted(ids[j] for j in gts[i] if j != tgt)
        ann.append({"reference_img_id": ids[ref], "target_img_id": ids[tgt], "relative_caption": q.text,
                    "shared_concept": shared_concept(bench, ref), "gt_img_ids": gt, "id": i,
                    "semantic_aspects": [q.edit_type]})
        out.queries[str(i)] = q.query_id
    out.json(f"annotations/{split}.json", ann)
    out.images([(f"COCO2017_unlabeled/unlabeled2017/{f}", _draw(bench, j, out.size)) for j, f in enumerate(files)],
               "circo")
    if split == "test":
        out.notes.append("test annotations carry target_img_id, gt_img_ids and semantic_aspects (the world "
                         "knows them; the official test file does not)")
    out.notes.append("semantic_aspects = the world's edit type, not CIRCO's nine aspects; images are JPEG "
                     "(quality 95) as COCO's are, so embeddings differ slightly from the native render")
    return {"split_name": split, "queries": len(ann), "gallery": len(ids)}


# -- FashionIQ ---------------------------------------------------------------------------------
def export_fashioniq(bench: WorldBenchmark, out: Out, split: str, category: str = "dress") -> dict[str, Any]:
    if category not in CATEGORIES:
        raise ExportError(f"--category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    names = [f"W{split[0].upper()}{j:08d}" for j in range(len(bench.items))]
    out.items.update({n: it.item_id for n, it in zip(names, bench.items)})
    out.json(f"image_splits/split.{category}.{split}.json", names)
    caps = []
    for i, q in enumerate(bench.queries):
        caps.append({"target": names[bench.target_idx[i]], "candidate": names[bench.reference_idx[i]],
                     "captions": [q.text, second_caption(q)]})
        out.queries[f"{category}/{i}"] = q.query_id
    out.json(f"captions/cap.{category}.{split}.json", caps)
    out.images([(f"images/{n}.jpg", _draw(bench, j, out.size)) for j, n in enumerate(names)], "fashioniq")
    out.notes.append(f"one category ({category}): evaluate with --subset {category}; the second caption "
                     "rephrases the same edits")
    if split == "test":
        out.notes.append("test captions carry target (the world knows it; the official test file does not)")
    return {"split_name": split, "category": category, "queries": len(caps), "gallery": len(names)}


# -- GeneCIS -----------------------------------------------------------------------------------
def export_genecis(bench: WorldBenchmark, out: Out, split: str) -> dict[str, Any]:
    ids = [j + 1 for j in range(len(bench.items))]
    tasks: dict[str, list[dict]] = {"change_attribute": [], "change_object": []}
    need: dict[str, int] = {}  # relative image path -> gallery row
    box = [0, 0, out.size, out.size]  # the whole image: the official dilated crop keeps it whole

    def entry(row: int, attribute: bool) -> dict:
        if attribute:
            need[f"VG_100K_all/{ids[row]}.jpg"] = row
            return {"image_id": str(ids[row]), "instance_bbox": list(box)}
        need[f"val2017/{ids[row]:012d}.jpg"] = row
        return {"val_image_id": ids[row]}

    for i, q in enumerate(bench.queries):
        attribute = {e.op for e in q.edits} <= ATTRIBUTE_OPS
        task = "change_attribute" if attribute else "change_object"
        tgt = bench.target_idx[i]
        tasks[task].append({"condition": q.text,
                            "gallery": [entry(j, attribute) for j in bench.subsets[i] if j != tgt],
                            "reference": entry(bench.reference_idx[i], attribute),
                            "target": entry(tgt, attribute)})
        out.queries[f"{task}/{len(tasks[task]) - 1}"] = q.query_id
    for task, samples in tasks.items():
        if samples:
            out.json(f"genecis/{task}.json", samples)
    out.items.update({str(x): it.item_id for x, it in zip(ids, bench.items)})
    out.images([(rel, _draw(bench, row, out.size)) for rel, row in need.items()], "genecis")
    written = [t for t, s in tasks.items() if s]
    out.notes.append(f"tasks {', '.join(written)} only (colour/size/shape edits are change_attribute, with a "
                     f"whole-image instance_bbox; the rest change_object): evaluate with --subset {','.join(written)}")
    return {"split_name": split, "queries": sum(len(s) for s in tasks.values()),
            "tasks": {t: len(s) for t, s in tasks.items()}, "images": len(need)}


# -- MovieNet identity set ---------------------------------------------------------------------
def export_movienet(bench: WorldBenchmark, out: Out, split: str) -> dict[str, Any]:
    film = f"world-{split}"
    frames = [f"frames/{film}/shot_{j:06d}_img_0.jpg" for j in range(len(bench.items))]
    out.items.update({f: it.item_id for f, it in zip(frames, bench.items)})
    out.jsonl("gallery.jsonl", ({"frame": f, "film_id": film, "character_ids": [it.scene.character.name]}
                                for f, it in zip(frames, bench.items)))
    rows = []
    for i, q in enumerate(bench.queries):
        ref = bench.reference_idx[i]
        rows.append({"query_id": q.query_id, "reference_frame": frames[ref], "edit": q.text, "film_id": film,
                     "character_id": bench.items[ref].scene.character.name})
        out.queries[q.query_id] = q.query_id
    out.jsonl("queries.jsonl", rows)
    out.images([(f, _draw(bench, j, out.size)) for j, f in enumerate(frames)], "movienet")
    return {"split_name": split, "queries": len(rows), "gallery": len(frames)}


# -- ITT ---------------------------------------------------------------------------------------
def norm_text(text: str) -> str:
    """training/itt/schema.py norm_text: case, whitespace and final punctuation ignored."""
    return collapse_whitespace(text).casefold().rstrip(" .!?;,")


def itt_id(image_id: str, source_caption: str, edit_type: str) -> str:
    """training/itt/schema.py make_id: sha1 of (image id, caption, edit type), 16 hex digits."""
    key = "\x1f".join((image_id, collapse_whitespace(source_caption), edit_type))
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


def itt_record(q: WorldQuery, image: str, image_id: str, split: str) -> tuple[dict | None, str]:
    """(the ITT record of `q`, "") or (None, why it cannot be one)."""
    if q.edit_type not in ITT_TYPES:
        return None, f"edit type {q.edit_type} is not an ITT type"
    target = norm_text(q.target_caption)
    if target == norm_text(q.ref_caption):
        return None, "target caption equals the reference caption"
    if norm_text(q.text) == target:
        return None, "edit equals the target caption"
    if max(len(q.text), len(q.ref_caption), len(q.target_caption)) > MAX_EDIT_CHARS:
        return None, "text longer than the ITT limit"
    negs: list[str] = []
    for n in q.negatives:
        if norm_text(n) != target and norm_text(n) not in {norm_text(x) for x in negs}:
            negs.append(n)
    return {"id": itt_id(image_id, q.ref_caption, q.edit_type), "image": image, "image_id": image_id,
            "source_caption": q.ref_caption, "edit_type": q.edit_type, "edit": q.text,
            "target_caption": q.target_caption, "negatives": negs[:ITT_MAX_NEGATIVES],
            "generator": {"mode": "template", "model": f"cir-world-render-v{RENDER_VERSION}", "split": split},
            "ops": [e.op for e in q.edits]}, ""


def export_itt(queries: list[WorldQuery], out: Out, split: str) -> dict[str, Any]:
    manifest, records, skipped = [], [], {}
    jobs = []
    for q in queries:
        rel = f"images/{q.query_id}.png"
        manifest.append({"path": rel, "id": q.query_id, "caption": q.ref_caption})
        jobs.append((rel, lambda q=q: render(q.reference, out.size, q.ref_seed)))
        out.items[q.query_id] = f"reference of {q.query_id}"
        rec, why = itt_record(q, rel, q.query_id, split)
        if rec is None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        records.append(rec)
        out.queries[rec["id"]] = q.query_id
    out.jsonl("captions.jsonl", manifest)
    out.jsonl("itt.jsonl", records)
    out.images(jobs, "itt")
    out.notes.append("captions.jsonl: the image-caption manifest (reference images, their captions); "
                     "itt.jsonl: one ITT record per query of an ITT edit type")
    return {"split_name": split, "queries": len(queries), "records": len(records), "skipped": skipped}


def world_queries(n: int) -> list[WorldQuery]:
    """The training stream's first `n` queries (`query_stream(seed=0)`)."""
    return list(islice(query_stream(0), n))


WRITERS = {"cirr": export_cirr, "circo": export_circo, "fashioniq": export_fashioniq,
           "genecis": export_genecis, "lcirr": export_lcirr, "movienet": export_movienet}


def export(fmt: str, split: str, out: str | Path, n_queries: int | None = None, image_size: int = DEFAULT_SIZE,
           category: str = "dress", progress: bool = False, n_films: int | None = None) -> dict[str, Any]:
    """Write the world's `split` in format `fmt` under `out` (a new or empty folder); returns a
    summary. The split is `cir_core.world.build_benchmark(split, n_queries)`, the same one
    `--benchmark world --split S --n-queries N` evaluates (train: the training stream, itt only);
    for movienet-release, the film benchmark `build_film_benchmark(split, n_queries, n_films)`
    (`--benchmark films`)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if split not in SPLITS or (split == "train" and fmt not in TRAIN_FORMATS):
        raise ExportError(f"the world's splits are test and val (train: {', '.join(TRAIN_FORMATS)} only), "
                          f"not {split!r} for {fmt}")
    n = DEFAULT_N[split] if n_queries is None else n_queries
    if n < 1:
        raise ExportError(f"--n-queries must be >= 1, got {n}")
    if not 16 <= image_size <= 4096:
        raise ExportError(f"--image-size must be in 16..4096, got {image_size}")
    if category not in CATEGORIES:
        raise ExportError(f"--category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    if n_films is not None and (fmt != "movienet-release" or n_films < 1):
        raise ExportError(f"--n-films is movienet-release's (>= 1), got {n_films} for {fmt}")
    root = Path(out).expanduser()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ExportError(f"--out {root}: give a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    o = Out(root, image_size, progress)
    if split == "train":
        queries = world_queries(n)
        summary = (export_itt(queries, o, split) if fmt == "itt"
                   else {"cirr": export_cirr_train, "lcirr": export_lcirr_train}[fmt](queries, o))
        source = f"cir_core.world.query_stream(0), first {n}"
    elif fmt == "movienet-release":
        from ..films.benchmark import build_film_benchmark
        from .movienet_release import export_movienet_release

        summary = export_movienet_release(build_film_benchmark(split, n, n_films), o, split)
        source = f"cir_core.world.films.build_film_benchmark({split!r}, {n}, {n_films})"
    elif fmt == "itt":
        summary = export_itt(build_benchmark(split, n).queries, o, split)
        source = f"cir_core.world.build_benchmark({split!r}, {n})"
    else:
        bench = build_benchmark(split, n)
        kwargs = {"category": category} if fmt == "fashioniq" else {}
        summary = WRITERS[fmt](bench, o, split, **kwargs)
        source = f"cir_core.world.build_benchmark({split!r}, {n})"
    summary = {"format": fmt, "world_split": split, "n_queries": n, "image_size": image_size,
               "out": str(root), "images": o.n_images, **summary, "notes": o.notes}
    o.json(PROVENANCE, {**summary, "source": source, "render_version": RENDER_VERSION,
                        "items": o.items, "queries": o.queries})
    return summary
