"""The film gallery (`--gallery world:films`, 102,903 keyframes of 104 films): building it,
embedding it once (cold cache, the app's progress path), reopening it (warm cache), and the first
Compare answer of `python app.py --gallery world:films` on the warm cache — each beside the
world's default gallery (8,006 items) measured the same way in the same process, as ratios.

    python bench/bench_film_gallery.py [--repeats 3] [--limit N] [--cache DIR] [--threads 2]

`--limit` embeds only the first N keyframes (a quick look; the line says so). `--cache` keeps the
embeddings (default: a temporary folder, removed at the end). Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_first_start import once  # noqa: E402  (bench/ is this script's folder)


def spread(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median": round(xs[len(xs) // 2], 3), "min": round(xs[0], 3), "max": round(xs[-1], 3)}


def build_seconds(gallery: str) -> float:
    """Building the gallery in a fresh interpreter, imports excluded (they are the app's anyway)."""
    code = ("import time, cir_core.gallery, cir_core.engine.core as c; t = time.perf_counter(); "
            f"c.open_gallery({gallery!r}, 1000, 64); print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def embed_seconds(gallery, backbone, cache: Path, progress: bool) -> float:
    from cir_core.gallery import EmbeddingCache

    t0 = time.perf_counter()
    EmbeddingCache(cache).embed(gallery, backbone, progress=progress)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="embed only the first N keyframes")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import torch

    from cir_core.backbone import load_backbone
    from cir_core.engine.core import open_gallery
    from cir_core.gallery import Gallery
    from cir_core.paths import DEFAULT_BACKBONE

    torch.set_num_threads(a.threads)
    tmp = tempfile.TemporaryDirectory() if a.cache is None else None
    cache = Path(tmp.name) if tmp else a.cache
    load = os.getloadavg()
    bb = load_backbone(DEFAULT_BACKBONE)
    builds = {g: [build_seconds(g) for _ in range(a.repeats)] for g in ("world:films", "world")}
    films, _ = open_gallery("world:films", 1000, bb.image_size)
    world, _ = open_gallery("world", 1000, bb.image_size)
    if a.limit:
        films = Gallery.from_items(f"{films.name}-first{a.limit}", films.items[:a.limit], films.image_fn)
    cold_w = embed_seconds(world, bb, cache / "world", False)  # no shipped head start: a real encode
    cold_f = embed_seconds(films, bb, cache / "films", True)
    warm_f = [embed_seconds(films, bb, cache / "films", False) for _ in range(a.repeats)]
    warm_w = [embed_seconds(world, bb, cache / "world", False) for _ in range(a.repeats)]
    answers = {"world:films": [], "world": []}
    if not a.limit:
        ref = {"world:films": films.items[0].id, "world": world.items[0].id}
        edit = {"world:films": "Make the character sit down.",
                "world": "Make the square blue. Move the character to the left."}
        for _ in range(a.repeats):  # in turn, so a drift of the machine hits both alike
            for g in answers:
                answers[g].append(once(ref[g], ROOT, g, cache / ("films" if g == "world:films" else "world"),
                                       edit[g])["first_answer_s"])
    per_f, per_w = cold_f / len(films), cold_w / len(world)
    line = {"bench": "film_gallery", "date": time.strftime("%Y-%m-%d %H:%M"), "loadavg_start": load,
            "loadavg_end": os.getloadavg(), "threads": a.threads, "backbone": bb.id,
            "keyframes": len(films), "limit": a.limit, "world_items": len(world),
            "build_s": {g: spread(v) for g, v in builds.items()},
            "embed_cold_s": round(cold_f, 1), "embed_images_per_s": round(len(films) / cold_f, 1),
            "world_embed_cold_s": round(cold_w, 1), "world_images_per_s": round(len(world) / cold_w, 1),
            "per_image_ratio_films_over_world": round(per_f / per_w, 3),
            "reopen_warm_s": spread(warm_f), "world_reopen_warm_s": spread(warm_w),
            "first_answer_s": {g: spread(v) for g, v in answers.items() if v},
            "first_answer_ratio_films_over_world": (round(spread(answers["world:films"])["median"]
                                                          / spread(answers["world"])["median"], 3)
                                                    if answers["world"] else None)}
    print(json.dumps(line))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
