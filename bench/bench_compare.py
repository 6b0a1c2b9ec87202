"""One Compare request (four methods + the sum baseline + the progression) vs its floor.

The floor is what no implementation can avoid: one image encode of the (uploaded) reference, one
batched text encode of the edit and its sentences, and one exact FAISS search per method. The
request is `Engine.compare` on an upload, i.e. the app's work minus drawing thumbnails. Each
repeat uses a new edit text, so no text cache (the engine's or a method's) serves it. Prints one
JSON line per gallery: the shipped world gallery, and a random gallery of `--random-n` vectors.

    python bench/bench_compare.py [--world-queries 1000] [--random-n 100000] [--k 8] [--repeats 7]

A trained method whose checkpoint is missing runs at random init (same compute as trained) and is
listed under "random_init"; a method that is not registered is listed under "unavailable".
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
from cir_core.index import Index  # noqa: E402,F401  (sets OMP_WAIT_POLICY before faiss loads)

EDIT = "Make the square blue. Move the character {i} steps to the left."


def prepare_methods(engine) -> tuple[list[str], list[str]]:
    """Build every column; stand in a random-init instance for a missing checkpoint."""
    from cir_core.errors import CIRError
    from cir_core.methods import get_method_class, list_methods

    random_init, unavailable = [], []
    for name in engine.default_methods():
        try:
            engine.method(name)
        except CIRError:
            if name not in list_methods():
                unavailable.append(name)
                continue
            engine.use_method(name, get_method_class(name)(engine.text_memo))
            random_init.append(name)
    return random_init, unavailable


def floor_once(engine, img, text: str, sentences: list[str], n_methods: int, k: int) -> float:
    bb = engine.backbone
    t0 = time.perf_counter()
    v = bb.encode_images([img])
    bb.encode_texts([text, *sentences])
    q = v + 0.01 * np.random.default_rng(0).standard_normal(v.shape).astype(np.float32)
    for _ in range(n_methods):
        engine.index.search(q, k)
    return time.perf_counter() - t0


def request_once(engine, img, text: str, k: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    ref = engine.reference_from_upload(img, name="bench.png")  # a PIL image: never cached
    res = engine.compare(ref, text, k=k)
    took = time.perf_counter() - t0
    assert all(m.ok for m in res.methods), [m.error for m in res.methods if not m.ok]
    assert res.progression is not None and len(res.progression.steps) == 2
    return took, res.timings


def run(engine, label: str, img, k: int, repeats: int) -> dict:
    from cir_core.text import split_sentences

    random_init, unavailable = prepare_methods(engine)
    n_methods = len(engine.default_methods()) - len(unavailable)
    request_once(engine, img, EDIT.format(i=-1), k)  # warm-up: thread pools, lazy imports
    floor_once(engine, img, EDIT.format(i=-1), split_sentences(EDIT.format(i=-1)), n_methods, k)
    req, flo, stages = [], [], []
    for i in range(repeats):
        text = EDIT.format(i=i)
        engine.text_memo.clear()
        took, timings = request_once(engine, img, text, k)
        req.append(took)
        stages.append(timings)
        flo.append(floor_once(engine, img, text, split_sentences(text), n_methods, k))
    med = lambda xs: statistics.median(xs)  # noqa: E731
    return {
        "bench": "compare", "gallery": label, "n": len(engine.gallery), "dim": engine.backbone.dim,
        "backbone": engine.backbone.id, "index": engine.index.kind, "k": k, "repeats": repeats,
        "methods": engine.default_methods(), "random_init": random_init, "unavailable": unavailable,
        "progression_steps": 2, "request_s": round(med(req), 5), "floor_s": round(med(flo), 5),
        "ratio": round(med(req) / med(flo), 2),
        "stages_ms": {s: round(med([t[s] for t in stages]), 2) for s in stages[0]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-queries", type=int, default=1000, help="the shipped gallery's size (x8 images)")
    ap.add_argument("--random-n", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--skip-world", action="store_true")
    ap.add_argument("--skip-random", action="store_true")
    a = ap.parse_args()

    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from cir_core.settings import EngineConfig
    from cir_core.engine import Engine, load_engine

    world = load_engine(EngineConfig(world_queries=a.world_queries))  # the app's default setup
    img = world.image(world.bench.reference_idx[0], 256)
    if not a.skip_world:
        print(json.dumps(run(world, f"world-test-{a.world_queries}", img, a.k, a.repeats)), flush=True)
    if not a.skip_random:
        rng = np.random.default_rng(0)
        g = rng.standard_normal((a.random_n, world.backbone.dim), dtype=np.float32)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        rand = Engine.from_embeddings(world.backbone, g, name=f"random-{a.random_n}")
        print(json.dumps(run(rand, f"random-{a.random_n}", img, a.k, a.repeats)), flush=True)


if __name__ == "__main__":
    main()
