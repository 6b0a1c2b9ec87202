"""Gallery ingest throughput vs the backbone's bare forward pass, same N and batch size.

Ingest = `EmbeddingCache.embed` over a folder of N generated images with a cold cache (file
listing, fingerprints, decode (JPEG draft decoding at the model's size), preprocess, forward,
normalise, atomic save; decoding runs ahead of the forward, `cir_core.ingest`). Forward =
`backbone.model.encode_image` on already-preprocessed tensor batches. Prints one JSON line; run
each configuration several times (`--repeats`) and report the median with its spread.
    python bench/bench_ingest.py [--model cir-tiny-vit --n 512 --batch-size 64 --format png]
    python bench/bench_ingest.py --model ViT-B-32 --image-size 384 --format jpg --n 256 --batch-size 32
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


def write_images(folder: Path, n: int, size: int, fmt: str = "png", seed: int = 0) -> None:
    """N distinct images (a coloured background and a few shapes, some noise so JPEG and PNG
    sizes are realistic), sized like real thumbnails."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        img = Image.new("RGB", (size, size), tuple(int(c) for c in rng.integers(0, 256, 3)))
        draw = ImageDraw.Draw(img)
        for _ in range(3):
            x0, y0 = (int(v) for v in rng.integers(0, size - 8, 2))
            box = (x0, y0, x0 + int(rng.integers(8, size // 2)), y0 + int(rng.integers(8, size // 2)))
            draw.ellipse(box, fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        noise = rng.integers(-12, 13, (size, size, 3))
        img = Image.fromarray(np.clip(np.asarray(img, np.int16) + noise, 0, 255).astype(np.uint8))
        img.save(folder / f"{i:06d}.{fmt}", **({"quality": 90} if fmt == "jpg" else {}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cir-tiny-vit")
    ap.add_argument("--pretrained", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=256, help="side of the generated images")
    ap.add_argument("--format", choices=("png", "jpg"), default="png")
    ap.add_argument("--repeats", type=int, default=3, help="ingest/forward pairs (median and spread)")
    a = ap.parse_args()

    import torch

    backbone = load_backbone(a.model, pretrained=a.pretrained, device=a.device)
    ratios, ingest_runs, forward_runs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        imgs = Path(tmp, "imgs")
        imgs.mkdir()
        write_images(imgs, a.n, a.image_size, a.format)
        gallery = Gallery.from_folder(imgs)
        paths = [it.path for it in gallery.items]
        with torch.inference_mode():  # warm-up (not timed): allocator and kernel selection
            backbone.model.encode_image(backbone.image_tensor(paths[:a.batch_size]))
        # The model's own ceiling: preprocessing happens outside the timer.
        tensors = [backbone.image_tensor(paths[i : i + a.batch_size]) for i in range(0, a.n, a.batch_size)]
        for r in range(a.repeats):  # ingest and forward in turn, so both see the same machine load
            t0 = time.perf_counter()
            emb = EmbeddingCache(Path(tmp, f"cache{r}")).embed(gallery, backbone, batch_size=a.batch_size)
            ingest_s = time.perf_counter() - t0
            assert emb.shape == (a.n, backbone.dim)
            t0 = time.perf_counter()
            with torch.inference_mode():
                for b in tensors:
                    backbone.model.encode_image(b)
            if a.device.startswith("cuda"):
                torch.cuda.synchronize()
            forward_s = time.perf_counter() - t0
            ingest_runs.append(a.n / ingest_s)
            forward_runs.append(a.n / forward_s)
            ratios.append(forward_s / ingest_s)

    med = lambda xs: round(float(np.median(xs)), 3)  # noqa: E731
    print(json.dumps({
        "bench": "ingest", "model": backbone.id, "n": a.n, "batch_size": a.batch_size,
        "image_size": a.image_size, "format": a.format, "threads": torch.get_num_threads(),
        "repeats": a.repeats, "ingest_images_per_s": med(ingest_runs), "forward_images_per_s": med(forward_runs),
        "ratio": med(ratios), "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
        "load_avg_1m": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d"),
    }))


if __name__ == "__main__":
    main()
