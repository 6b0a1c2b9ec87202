"""Tiny real-benchmark folders in the EXACT official file formats, and a backbone whose embeddings
are known by construction, so every metric can be checked against a hand-computed value.

Image number i is a solid colour (`colour(i)`); `IndexBackbone` reads the centre pixel back to i
and embeds the image as the one-hot e_i (dim DIM). A text "w:2=0.9,4=0.5" embeds as
normalise(0.9·e_2 + 0.5·e_4) (all such pairs in the text are summed, so both FashionIQ caption
orders give the same vector); a text with none embeds as the uniform vector. With the
'text-only' method the query is exactly that vector, so the cosine ranking is the order of the
weights, ties going to the lower gallery row.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from PIL import Image

DIM = 96
_W = re.compile(r"(\d+)=(\d+(?:\.\d+)?)")


def colour(i: int) -> tuple[int, int, int]:
    if not 0 <= i < DIM:
        raise ValueError(f"image number {i} outside [0, {DIM})")
    return (8 + 24 * (i % 10), 8 + 24 * (i // 10), 128)


def write_image(path: Path, i: int, size: tuple[int, int] = (12, 12)) -> Path:
    """A solid image of colour(i); .jpg or .png by the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour(i)).save(path, quality=95)
    return path


def wtext(weights: dict[int, float], prefix: str = "w:") -> str:
    return prefix + ",".join(f"{k}={v}" for k, v in weights.items())


class IndexBackbone:
    """Stand-in Backbone: image -> one-hot of its colour's number, text -> its weight vector."""

    id = "test-index-backbone"
    dim = DIM
    image_size = 12

    def encode_images(self, images, batch_size: int = 64, progress: bool = False, with_norms: bool = False):
        out = np.zeros((len(images), DIM), np.float32)
        for row, im in enumerate(images):
            r, g, _ = im.convert("RGB").getpixel((im.width // 2, im.height // 2))
            out[row, round((r - 8) / 24) + 10 * round((g - 8) / 24)] = 1.0
        return (out, np.ones(len(images), np.float32)) if with_norms else out

    def encode_texts(self, texts, batch_size: int = 256, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), DIM), np.float32)
        for row, t in enumerate(texts):
            pairs = _W.findall(str(t))
            if not pairs:
                out[row] = 1.0
            for k, v in pairs:
                out[row, int(k)] += float(v)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1))


def write_cirr(root: Path, split: str, names: list[str], queries: list[dict],
               img_raw: bool = True, layout: str | None = None) -> Path:
    """CIRR rc2: image i of `names` is colour i; `queries` are the caption entries, written as
    given (pairid, reference, target_hard, caption, img_set). Layouts: "official" (the CIRR
    README: captions/, image_splits/, img_raw/<dev|test1>/), "searle" (SEARLE / CLIP4Cir:
    cirr/captions/, cirr/image_splits/, <dev|test1>/ beside cirr/), "flat" (images directly under
    ROOT); `img_raw=False` is "flat"."""
    layout = layout or ("official" if img_raw else "flat")
    sub = "dev" if split == "val" else split
    ann = root / "cirr" if layout == "searle" else root
    base = root / "img_raw" if layout == "official" else root
    for i, n in enumerate(names):
        write_image(base / sub / f"{n}.png", i)
    _dump(ann / "image_splits" / f"split.rc2.{split}.json", {n: f"./{sub}/{n}.png" for n in names})
    _dump(ann / "captions" / f"cap.rc2.{split}.json", queries)
    return root


def cirr_query(pairid: int, ref: str, target: str | None, caption: str, members: list[str]) -> dict:
    q = {"pairid": pairid, "reference": ref, "caption": caption,
         "img_set": {"id": pairid, "members": members, "reference_rank": 0, "target_rank": 1}}
    if target is not None:
        q["target_hard"], q["target_soft"] = target, {target: 1.0}
    return q


def write_circo(root: Path, ids: list[int], annotations: dict[str, list[dict]],
                info_file: bool = True) -> Path:
    """CIRCO: COCO unlabeled image with id ids[i] is colour i; annotations {split: [entries]}."""
    folder = root / "COCO2017_unlabeled" / "unlabeled2017"
    for i, x in enumerate(ids):
        write_image(folder / f"{x:012d}.jpg", i)
    if info_file:
        _dump(root / "COCO2017_unlabeled" / "annotations" / "image_info_unlabeled2017.json",
              {"images": [{"id": x, "file_name": f"{x:012d}.jpg"} for x in ids]})
    for split, entries in annotations.items():
        _dump(root / "annotations" / f"{split}.json", entries)
    return root


def write_fashioniq(root: Path, category: str, names: list[str], triplets: list[dict],
                    first: int = 0, extra_images: dict[str, int] | None = None, ext: str = ".jpg") -> Path:
    """FashionIQ val of one category: names[i] is colour first+i, as images/<name>.jpg (the
    name CLIP4Cir, SEARLE and the start kit read; `ext` for another); extra_images are written
    (name -> colour) but not listed in the split file."""
    for i, n in enumerate(names):
        write_image(root / "images" / f"{n}{ext}", first + i)
    for n, i in (extra_images or {}).items():
        write_image(root / "images" / f"{n}{ext}", i)
    _dump(root / "image_splits" / f"split.{category}.val.json", names)
    _dump(root / "captions" / f"cap.{category}.val.json", triplets)
    return root


def write_genecis(root: Path, task: str, samples: list[dict], vg: dict[int, tuple[int, tuple[int, int]]],
                  coco: dict[int, int]) -> Path:
    """GeneCIS: task JSON under genecis/; VG image id -> (colour, (w, h)), COCO val id -> colour."""
    for iid, (i, size) in vg.items():
        write_image(root / "VG_100K_all" / f"{iid}.jpg", i, size)
    for iid, i in coco.items():
        write_image(root / "val2017" / f"{iid:012d}.jpg", i)
    _dump(root / "genecis" / f"{task}.json", samples)
    return root


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_movienet(root: Path, frames: list[tuple[str, str, list[str]]], queries: list[dict]) -> Path:
    """frames: (relative path, film_id, character_ids); frame i is colour i."""
    for i, (rel, _, _) in enumerate(frames):
        write_image(root / rel, i)
    write_jsonl(root / "gallery.jsonl", [{"frame": r, "film_id": f, "character_ids": c} for r, f, c in frames])
    write_jsonl(root / "queries.jsonl", queries)
    return root


def write_demo(out: Path) -> dict[str, Path]:
    """One small folder per benchmark under `out`, in the official layouts (for trying the CLI):
    python -m tests._bench_fixtures OUT."""
    out = Path(out)
    n = [f"dev-{i}-0-img0" for i in range(60)]
    t = [f"test1-{i}-0-img0" for i in range(60)]
    write_cirr(out / "cirr", "val", n, [
        cirr_query(i, n[i], n[i + 1], wtext({i + 1: 1, i + 2: 0.5}), n[i:i + 6]) for i in range(0, 40, 4)])
    write_cirr(out / "cirr", "test1", t, [
        cirr_query(100 + i, t[i], None, wtext({i + 3: 1}), t[i:i + 6]) for i in range(0, 20, 5)])
    write_jsonl(out / "cirr" / "lcirr" / "val.jsonl", [
        {"pairid": i, "reference": n[i], "target": n[i + 2],
         "text": f"Keep the scene, w:{i + 1}=1. Then w:{i + 2}=2. Finally w:{i + 2}=2."} for i in range(0, 40, 4)])
    ids = [100 + 13 * i for i in range(60)]
    write_circo(out / "circo", ids, {
        "val": [{"id": q, "reference_img_id": ids[2 * q], "target_img_id": ids[2 * q + 1],
                 "gt_img_ids": [ids[2 * q + 1], ids[2 * q + 3]], "relative_caption": wtext({2 * q + 1: 1}),
                 "shared_concept": "a dog"} for q in range(8)],
        "test": [{"id": q, "reference_img_id": ids[q], "relative_caption": wtext({q + 5: 1}),
                  "shared_concept": "a cat"} for q in range(8)]})
    for c, cat in enumerate(("dress", "shirt", "toptee")):
        names = [f"B0{c}{i:05d}" for i in range(55)]
        write_fashioniq(out / "fashioniq", cat, names, [
            {"candidate": names[i], "target": names[i + 3], "captions": [wtext({i + 3: 1}), "is darker"]}
            for i in range(0, 30, 3)])
    vg = {i: (i, (40, 30)) for i in range(1, 9)}
    coco = {1000 + i: 20 + i for i in range(8)}
    att = [{"reference": {"image_id": r, "instance_bbox": [4, 4, 12, 10]},
            "target": {"image_id": r + 1, "instance_bbox": [2, 2, 8, 8]}, "condition": wtext({r + 1: 1}),
            "gallery": [{"image_id": g, "instance_bbox": [1, 1, 9, 9]} for g in range(1, 9) if g not in (r, r + 1)][:4]}
           for r in range(1, 7)]
    obj = [{"reference": {"val_image_id": 1000 + r}, "target": {"val_image_id": 1001 + r},
            "condition": wtext({21 + r: 1}),
            "gallery": [{"val_image_id": 1000 + g} for g in range(8) if g not in (r, r + 1)][:4]} for r in range(6)]
    for task, samples in (("focus_attribute", att), ("change_attribute", att), ("focus_object", obj),
                          ("change_object", obj)):
        write_genecis(out / "genecis", task, samples, vg, coco)
    frames = [(f"frames/tt{i // 10:02d}/shot_{i:04d}_img_0.jpg", f"tt{i // 10:02d}", [f"nm{i % 4}"] if i % 5 else [])
              for i in range(40)]
    write_movienet(out / "movienet", frames, [
        {"query_id": f"q{i}", "reference_frame": frames[i][0], "edit": f"now at night, {wtext({i + 4: 1})}",
         "film_id": frames[i][1], "character_id": frames[i][2][0] if frames[i][2] else None} for i in range(1, 30, 3)])
    return {k: out / k for k in ("cirr", "circo", "fashioniq", "genecis", "movienet")}


if __name__ == "__main__":
    import sys

    for name, path in write_demo(Path(sys.argv[1] if len(sys.argv) > 1 else "bench_demo")).items():
        print(f"{name}: {path}")
