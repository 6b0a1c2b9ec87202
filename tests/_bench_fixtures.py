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

    def encode_images(self, images, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(images), DIM), np.float32)
        for row, im in enumerate(images):
            r, g, _ = im.convert("RGB").getpixel((im.width // 2, im.height // 2))
            out[row, round((r - 8) / 24) + 10 * round((g - 8) / 24)] = 1.0
        return out

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
               img_raw: bool = True) -> Path:
    """CIRR rc2: image i of `names` is colour i, under img_raw/<dev|test1>/; `queries` are the
    caption entries, written as given (pairid, reference, target_hard, caption, img_set)."""
    sub = "dev" if split == "val" else split
    base = root / "img_raw" if img_raw else root
    for i, n in enumerate(names):
        write_image(base / sub / f"{n}.png", i)
    _dump(root / "image_splits" / f"split.rc2.{split}.json", {n: f"./{sub}/{n}.png" for n in names})
    _dump(root / "captions" / f"cap.rc2.{split}.json", queries)
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
                    first: int = 0, extra_images: dict[str, int] | None = None) -> Path:
    """FashionIQ val of one category: names[i] is colour first+i; extra_images are written
    (name -> colour) but not listed in the split file."""
    for i, n in enumerate(names):
        write_image(root / "images" / f"{n}.png", first + i)
    for n, i in (extra_images or {}).items():
        write_image(root / "images" / f"{n}.png", i)
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
