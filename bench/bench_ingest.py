"""Gallery ingest throughput vs the backbone's bare forward pass, same N and batch size.

Ingest = `EmbeddingCache.embed` over a folder of N generated PNGs with a cold cache (file
listing, fingerprints, decode, preprocess, forward, normalise, atomic save). Forward =
`backbone.model.encode_image` on already-preprocessed tensor batches. Prints one JSON line.
    python bench/bench_ingest.py [--model cir-tiny-vit --pretrained PATH --n 512 --batch-size 64]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a pretrained tag otherwise spends ~47 s retrying
from cir_core.backbone import load_backbone  # noqa: E402
from cir_core.gallery import EmbeddingCache, Gallery  # noqa: E402


def write_images(folder: Path, n: int, size: int, seed: int = 0) -> None:
    """N distinct PNGs (a coloured background and a few shapes), sized like real thumbnails."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        img = Image.new("RGB", (size, size), tuple(int(c) for c in rng.integers(0, 256, 3)))
        draw = ImageDraw.Draw(img)
        for _ in range(3):
            x0, y0 = (int(v) for v in rng.integers(0, size - 8, 2))
            box = (x0, y0, x0 + int(rng.integers(8, size // 2)), y0 + int(rng.integers(8, size // 2)))
            draw.ellipse(box, fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        img.save(folder / f"{i:06d}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cir-tiny-vit")
    ap.add_argument("--pretrained", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=256, help="side of the generated PNGs")
    a = ap.parse_args()

    import torch

    backbone = load_backbone(a.model, pretrained=a.pretrained, device=a.device)
    with tempfile.TemporaryDirectory() as tmp:
        imgs, cache_root = Path(tmp, "imgs"), Path(tmp, "cache")
        imgs.mkdir()
        write_images(imgs, a.n, a.image_size)

        # Warm-up (not timed): first forward pays allocator and kernel selection.
        with torch.inference_mode():
            backbone.model.encode_image(backbone.image_tensor([imgs / "000000.png"]))

        t0 = time.perf_counter()
        gallery = Gallery.from_folder(imgs)
        emb = EmbeddingCache(cache_root).embed(gallery, backbone, batch_size=a.batch_size)
        ingest_s = time.perf_counter() - t0
        assert emb.shape == (a.n, backbone.dim)

        # Preprocessing happens outside the timer: this is the model's own ceiling.
        paths = [it.path for it in gallery.items]
        batches = [backbone.image_tensor(paths[i : i + a.batch_size]) for i in range(0, a.n, a.batch_size)]
        t0 = time.perf_counter()
        with torch.inference_mode():
            for b in batches:
                backbone.model.encode_image(b)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        forward_s = time.perf_counter() - t0

    ingest_ips, forward_ips = a.n / ingest_s, a.n / forward_s
    print(json.dumps({
        "bench": "ingest", "model": backbone.id, "n": a.n, "batch_size": a.batch_size,
        "image_size": a.image_size, "threads": torch.get_num_threads(),
        "ingest_s": round(ingest_s, 4), "forward_s": round(forward_s, 4),
        "ingest_images_per_s": round(ingest_ips, 1), "forward_images_per_s": round(forward_ips, 1),
        "ratio": round(ingest_ips / forward_ips, 3),
    }))


if __name__ == "__main__":
    main()
