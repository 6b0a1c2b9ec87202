"""Frozen-embedding caches of real training data (ITT, CIRR, FashionIQ, L-CIRR) for any open_clip
backbone: the same `TrainEmbeddings` layout the world's cache has, so every trainer reads both.

    python -m training.real_cache --data itt:captions_itt.jsonl --backbone ViT-L-14 --pretrained openai
    torchrun --nproc_per_node 4 -m training.real_cache --data cirr:/data/cirr --backbone ViT-L-14 --pretrained openai

Images are embedded by `cir_core.index build` (DataLoader workers decoding ahead of the forward,
resumable atomic shards, a tqdm bar, `torchrun` sharding); texts in one batched pass (rank 0).
What a source lacks is recorded in the cache's meta (`ref_captions`, `target_captions`,
`target_images`) and each trainer says plainly when it needs what is missing.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from cir_core import env
from cir_core.encoder import Encoder, TensorEncoder
from cir_core.errors import InputError
from cir_core.paths import cache_dir
from cir_core.settings import add_backbone_args, add_device_arg
from cir_core.world import EDIT_TYPES

from .embed_cache import ARRAYS, FORMAT_VERSION, TextFields, TrainEmbeddings, encode_texts_by_length, write_cache
from .triplets import Triplet, read_triplets


def stable_hash(text: str) -> int:
    """A stable int64 of an id or a caption (equal texts: the same key)."""
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "little", signed=True)


def cache_folder(root: Path, backbone: Encoder, spec: str, triplets: list[Triplet]) -> Path:
    digest = hashlib.sha1(json.dumps([backbone.id, spec, FORMAT_VERSION,
                                      [(t.ref_image, t.edit, t.target_caption, t.target_image, t.negatives)
                                       for t in triplets]]).encode()).hexdigest()[:12]
    kind = spec.partition(":")[0]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in backbone.id)[:60]
    return root / f"{kind}-{safe}-n{len(triplets)}-{digest}"


def build_real_cache(spec: str, backbone: TensorEncoder, image_root: str | None = None, n: int | None = None,
                     root: Path | None = None, workers: int = 2, batch_size: int = 64,
                     progress: bool = True) -> TrainEmbeddings:
    """The cache of the first `n` triplets of `spec` (all when None) under `backbone`: built once
    (resumably: finished image shards are kept), then reused."""
    triplets = read_triplets(spec, image_root)[:n] if n else read_triplets(spec, image_root)
    folder = cache_folder(Path(root) if root else cache_dir() / "train", backbone, spec, triplets)
    if (folder / "meta.json").is_file():
        return TrainEmbeddings(folder)
    rank = int(env.read("RANK", "0"))
    t0 = time.time()
    rows = _embed_images(triplets, backbone, folder.with_name(folder.name + ".images"), workers, batch_size, progress)
    if rank != 0:  # rank 0 writes the cache; the others wait for it (the process group is gone)
        while not (folder / "meta.json").is_file():
            time.sleep(1.0)
        return TrainEmbeddings(folder)
    arrays, texts = _arrays(triplets, backbone, rows)
    meta = {"backbone": backbone.id, "dim": backbone.dim, "n": len(triplets), "source": spec,
            "image_root": image_root, "format": FORMAT_VERSION, "n_texts": len(texts),
            "n_sentences": int(arrays["sent_off"][-1]), "edit_types": list(EDIT_TYPES),
            "ref_captions": all(t.ref_caption for t in triplets),
            "target_captions": all(t.target_caption for t in triplets),
            "target_images": all(t.target_image for t in triplets),
            "build_seconds": round(time.time() - t0, 1)}
    write_cache(folder, arrays, texts, meta)
    return TrainEmbeddings(folder)


def _embed_images(triplets: list[Triplet], backbone: TensorEncoder, out: Path, workers: int, batch_size: int,
                  progress: bool) -> dict[str, np.ndarray]:
    """path -> embedding of every distinct image, through `cir_core.index build`."""
    from cir_core.index.build import build
    from cir_core.index.prebuilt import open_prebuilt

    paths = list(dict.fromkeys(p for t in triplets for p in (t.ref_image, t.target_image) if p))
    out.mkdir(parents=True, exist_ok=True)
    manifest = out.with_name(out.name + ".jsonl")
    manifest.write_text("".join(json.dumps({"id": str(i), "path": p}) + "\n" for i, p in enumerate(paths)))
    build(str(manifest), backbone, None, out, batch_size=batch_size, workers=workers, kind="flat",
          exact_max=len(paths) + 1, progress=progress)
    if int(env.read("RANK", "0")) != 0:
        return {}
    pre = open_prebuilt(out)
    got = {it.path: np.asarray(pre.embeddings[i], np.float32) for i, it in enumerate(pre.gallery.items)}
    missing = [p for p in paths if p not in got]
    if missing:
        raise InputError(f"{len(missing)} training image(s) could not be read, e.g. {missing[0]!r} "
                         f"(see {out / 'skipped.jsonl'})")
    return got


def _arrays(triplets: list[Triplet], backbone: Encoder, images: dict[str, np.ndarray]) -> tuple[dict, list[str]]:
    text_ids: dict[str, int] = {}

    def tid(t: str | None) -> int:
        return -1 if not t else text_ids.setdefault(t, len(text_ids))

    fields = TextFields(tid)
    for t in triplets:
        fields.add(t.ref_caption, t.edit, t.target_caption, t.negatives,
                   EDIT_TYPES.index(t.edit_type) if t.edit_type in EDIT_TYPES else -1,
                   stable_hash(t.ref_key), stable_hash(t.target_key or f"caption:{t.target_caption}"))
    texts = list(text_ids)
    zero = np.zeros(backbone.dim, np.float32)
    arrays = {
        "ref_img": np.stack([images[t.ref_image] for t in triplets]).astype(np.float16),
        "tgt_img": np.stack([images[t.target_image] if t.target_image else zero for t in triplets]).astype(np.float16),
        "texts": encode_texts_by_length(backbone, texts),
        **fields.arrays(),
    }
    assert set(arrays) == set(ARRAYS)
    return arrays, texts


def main(argv: list[str] | None = None) -> None:
    from cir_core.backbone import DEFAULT_MODEL, load_backbone

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="itt:FILE, cirr:ROOT, fashioniq:ROOT or lcirr:ROOT")
    ap.add_argument("--image-root", default=None, help="ITT: where its image paths start (default: its folder)")
    add_backbone_args(ap, default=DEFAULT_MODEL)
    add_device_arg(ap, default=None)
    ap.add_argument("--n", type=int, default=None, help="only the first N triplets")
    ap.add_argument("--root", type=Path, default=None, help="default: cir_core.paths.cache_dir()/train")
    ap.add_argument("--workers", type=int, default=2, help="image-decoding worker processes")
    ap.add_argument("--batch-size", type=int, default=64)
    a = ap.parse_args(argv)
    import torch

    dev = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    bb = load_backbone(a.backbone, a.pretrained, device=dev)
    print(build_real_cache(a.data, bb, a.image_root, a.n, a.root, a.workers, a.batch_size))


if __name__ == "__main__":
    main()
