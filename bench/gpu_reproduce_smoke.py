"""The device check to run when a GPU is lent (docs/GPU.md): the trainers' smoke check and the
training-free rows' embedding throughput, both on a random-init backbone (no weights needed), the
numbers appended to docs/GPU.md's "Measured" table.

    python bench/gpu_reproduce_smoke.py                       # ViT-L-14, cuda when visible, ~3-5 min
    python bench/gpu_reproduce_smoke.py --model cir-tiny-vit --steps 2 --batch 8 --images 16 \\
        --device cpu --only dice --doc /tmp/GPU.md             # the CPU rehearsal the tests run

1. `training.gpu_smoke` (every trainer, or `--only`) for `--steps` steps: steps/s, samples/s, peak
   memory per trainer.
2. The path `python -m cir_core.reproduce run` takes for a training-free row, timed: the world
   exported in CIRR's layout at the backbone's input size (`--images` gallery images), its gallery
   embedded through `cir_core.eval.loop.embed_benchmark` (decode, the backbone's preprocessing,
   the fp32 image tower, as the evaluation runs; a fresh cache, after a warm-up batch), then
   image-only, text-only and sum composed and scored (`score_method`): images/s and queries/s.

One JSON line per part on stdout; `--doc` gets one table row per part (date, commit, device, the
load average when the run started and, for the embedding part, when it ended).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from cir_core.report_header import report_header  # noqa: E402

START, END = "<!-- gpu-reproduce-smoke -->", "<!-- /gpu-reproduce-smoke -->"
TRAINING_FREE = ("image-only", "text-only", "sum")


def embed_throughput(model: str, device: str, images: int) -> dict:
    """The training-free rows' path on a random-init `model`: gallery images/s and queries/s."""
    import torch

    from cir_core.backbone import load_backbone, random_init_on_purpose
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import embed_benchmark, score_method
    from cir_core.methods.factory import create_method
    from cir_core.search.scoring import ScoreOpts
    from cir_core.world.export import export

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    with random_init_on_purpose():  # random weights are the point here: no download, no warning
        backbone = load_backbone(model, None, device=device)
    with tempfile.TemporaryDirectory(prefix="gpu-reproduce-") as tmp:
        root = Path(tmp) / "cirr"
        export("cirr", "val", root, n_queries=max(1, images // 8), image_size=backbone.image_size, progress=False)
        bench = load_benchmark("cirr", root, "val")
        n = len(bench.gallery)
        backbone.encode_images([bench.gallery.items[0].path] * min(8, n))  # warm-up (CUDA kernels)
        sync()
        t0 = time.perf_counter()
        data = embed_benchmark(bench, backbone, Path(tmp) / "cache", progress=False)
        sync()
        embed_s = time.perf_counter() - t0
        per_method = {}
        for name in TRAINING_FREE:
            method = create_method(name, backbone)
            t0 = time.perf_counter()
            score_method(bench, method, data, [ScoreOpts("cosine")])
            sync()
            per_method[name] = round(bench.n_queries() / (time.perf_counter() - t0), 1)
    return {"part": "embed", "model": model, "device": device, "images": n, "image_size": backbone.image_size,
            "embed_s": round(embed_s, 2), "images_per_s": round(n / embed_s, 1), "queries": bench.n_queries(),
            "queries_per_s": per_method, "precision": "fp32 (the evaluation's path)",
            "load_1m_after": round(os.getloadavg()[0], 2)}


def doc_rows(records: list[dict], header: dict) -> list[str]:
    """One markdown table row per record."""
    date, commit = header["date"][:10], header["commit"] + ("+" if header["dirty"] else "")
    out = []
    for r in records:
        if "error" in r:
            out.append(f"| {date} | {commit} | {header['device']} | {r.get('trainer', r.get('part'))} | "
                       f"{r.get('model', '')} | | | | | | | error: {r['error'][:80]} |")
        elif r.get("part") == "embed":
            q = ", ".join(f"{k} {v:g}" for k, v in r["queries_per_s"].items())
            out.append(f"| {date} | {commit} | {header['device']} | embed ({r['images']} images, "
                       f"{r['image_size']} px) | {r['model']} | | | | {r['images_per_s']:g} | {q} | | "
                       f"{r['embed_s']:g} s, load {header['load']['load_1m']} → {r['load_1m_after']} |")
        else:
            out.append(f"| {date} | {commit} | {header['device']} | {r['trainer']} | {r['model']} | {r['batch']} | "
                       f"{r['steps_per_s']} | {r['samples_per_s']} | | | {r['peak_mem_gb'] or '—'} | "
                       f"{r['total_s']} s, load {header['load']['load_1m']} |")
    return out


def append_to_doc(doc: Path, rows: list[str]) -> None:
    """Append `rows` to the table between the markers of `doc` (replacing its "not measured yet"
    row); ValueError when the markers are missing."""
    text = doc.read_text(encoding="utf-8")
    m = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, re.S)
    if not m:
        raise ValueError(f"{doc}: no {START} ... {END} table to append to")
    body = [line for line in m.group(1).splitlines() if "not measured yet" not in line]
    new = "\n".join(body + rows) + "\n"
    doc.write_text(text[:m.start(1)] + new + text[m.end(1):], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="ViT-L-14", help="open_clip architecture, random init (default ViT-L-14)")
    ap.add_argument("--device", default="auto", help="auto (cuda when visible) | cuda | cpu")
    ap.add_argument("--steps", type=int, default=100, help="trainer steps each (default 100)")
    ap.add_argument("--batch", type=int, default=0, help="trainers' batch (default: each vitl14 config's)")
    ap.add_argument("--only", default=None, help="trainers, comma-separated (default: all)")
    ap.add_argument("--images", type=int, default=1024, help="gallery images to embed (default 1024)")
    ap.add_argument("--skip-train", action="store_true", help="only the embedding throughput")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "GPU.md", help="the page to append the rows to")
    args = ap.parse_args(argv)
    import torch

    from cir_core.settings import apply_offline_default
    from training import gpu_smoke

    apply_offline_default(False)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    header = report_header(backbone=f"{args.model}@random-init", device=device)
    records: list[dict] = []
    if not args.skip_train:
        train_argv = ["--model", args.model, "--steps", str(args.steps), "--device", device]
        train_argv += ["--batch", str(args.batch)] if args.batch else []
        train_argv += ["--only", args.only] if args.only else []
        records += gpu_smoke.main(train_argv)  # prints its own JSON lines
    try:
        rec = embed_throughput(args.model, "cuda:0" if device == "cuda" else device, args.images)
    except Exception as exc:  # report it in the table too: a failed check is a result
        rec = {"part": "embed", "model": args.model, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(rec), flush=True)
    records.append(rec)
    append_to_doc(args.doc, doc_rows(records, header))
    print(f"appended {len(records)} rows to {args.doc}", file=sys.stderr)
    return 1 if any("error" in r for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
