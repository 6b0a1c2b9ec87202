"""One Compare request (the app's columns + the sum baseline + the progression) vs its floor.

The floor is what no implementation of the same methods can avoid, measured part by part in the
same run, each at its best batching:
  - the reference's image encode (an upload; a gallery item costs nothing and is not timed);
  - one frozen text-tower forward over every distinct text the frozen-tower methods need (the
    edit, the empty edit, each sentence);
  - one forward of each LoRA text tower (PACT, compose-only) for q (under cosine, the request's
    scoring, q_∅ is not needed; an uploaded reference has no cached one);
  - one scan of the gallery for all of the request's queries (one product + top-k; exact for a
    flat index, the approximate index's search otherwise).
Beside it, `heads`: the other trained methods' own networks on memoised text embeddings (DiCE's
MLP, PACE's q0 and accumulator), which the issue's floor leaves out; `ratio_with_heads` counts them.
The request is `Engine.compare` on an upload, i.e. the app's work minus drawing thumbnails; each
repeat uses a new edit text (no text cache serves it). Prints one JSON line per gallery with the
p50/p95 of the request, of the floor and of each stage, and the ratio of the medians.

    python bench/bench_compare.py [--world-queries 1000] [--random-n 100000] [--k 8] [--repeats 15]
    python bench/bench_compare.py --backbone ViT-B-32 --skip-world --random-n 100000   # real size, random init

A trained method whose checkpoint does not fit the backbone runs at random init (same compute
as trained) and is listed under "random_init".
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
from cir_core.search import Index  # noqa: E402,F401  (sets OMP_WAIT_POLICY before faiss loads)
from cir_core.settings import add_backbone_args

EDIT = "Make the square blue. Move the character {i} steps to the left."


def prepare_methods(engine) -> list[str]:
    """Build every column; stand in a random-init instance for a checkpoint that does not fit."""
    from cir_core.errors import CIRError
    from cir_core.methods import get_method_class

    random_init = []
    for name in engine.methods.default():
        try:
            engine.methods.get(name)
        except CIRError:
            engine.methods.install(name, get_method_class(name)(engine.memo))
            random_init.append(name)
    return random_init


def floor_parts(engine, img, text: str, n_queries: int, k: int) -> dict[str, float]:
    """Seconds of each unavoidable part (see the module docstring)."""
    from cir_core.search import Queries, ScoreOpts, rank
    from cir_core.text import split_sentences

    bb, out = engine.backbone, {}
    t = time.perf_counter()
    v = bb.encode_images([img])
    out["reference"] = time.perf_counter() - t
    t = time.perf_counter()
    bb.encode_texts(list(dict.fromkeys([text, "", *split_sentences(text)])))
    out["frozen_text"] = time.perf_counter() - t
    t = time.perf_counter()
    for name in engine.methods.default():
        method = engine.methods.get(name)
        if getattr(method, "composer", None) is not None:  # a LoRA tower: q (cosine needs no q_∅)
            method.compose(v, [text])
    out["lora_text"] = time.perf_counter() - t
    t = time.perf_counter()
    for name in engine.methods.default():  # the other trained methods' own networks, texts memoised
        method = engine.methods.get(name)
        if getattr(method, "module", None) is not None and getattr(method, "composer", None) is None:
            method.compose(v, [text])
    out["heads"] = time.perf_counter() - t  # not in the floor: reported beside it
    qs = v + 0.01 * np.random.default_rng(0).standard_normal((n_queries, v.shape[1])).astype(np.float32)
    t = time.perf_counter()
    rank(Queries(qs, None, v), engine.searcher, ScoreOpts("cosine"), k)
    out["scan"] = time.perf_counter() - t
    return out


def request_once(engine, img, text: str, k: int) -> tuple[float, dict, int]:
    t0 = time.perf_counter()
    ref = engine.view.reference_from_upload(img, name="bench.png")  # a PIL image: never cached
    res = engine.compare(ref, text, k=k)
    took = time.perf_counter() - t0
    assert all(m.ok for m in res.methods), [m.error for m in res.methods if not m.ok]
    n_queries = len(res.methods) + (len(res.progression.steps) if res.progression else 0)
    return took, res.timings, n_queries


def pcts(xs: list[float], scale: float = 1000.0) -> dict[str, float]:
    a = np.asarray(xs) * scale
    return {"p50": round(float(np.percentile(a, 50)), 2), "p95": round(float(np.percentile(a, 95)), 2)}


def run(engine, label: str, img, k: int, repeats: int) -> dict:
    random_init = prepare_methods(engine)
    _, _, nq = request_once(engine, img, EDIT.format(i=-1), k)  # warm-up: thread pools, lazy imports
    floor_parts(engine, img, EDIT.format(i=-1), nq, k)
    req, flo, stages, parts, heads = [], [], [], [], []
    for i in range(repeats):
        text = EDIT.format(i=i)
        engine.memo.clear()
        took, timings, nq = request_once(engine, img, text, k)
        req.append(took)
        stages.append(timings)
        p = floor_parts(engine, img, text, nq, k)
        parts.append(p)
        flo.append(sum(v for part, v in p.items() if part != "heads"))
        heads.append(p["heads"])
    return {
        "bench": "compare", "gallery": label, "n": len(engine.view.gallery), "dim": engine.backbone.dim,
        "backbone": engine.backbone.id, "search": engine.searcher.kind, "k": k, "repeats": repeats,
        "methods": engine.methods.default(), "random_init": random_init, "queries_ranked": nq,
        "request_ms": pcts(req), "floor_ms": pcts(flo),
        "ratio": round(float(np.median(req) / np.median(flo)), 3),
        "ratio_each_run": {"min": round(min(r / f for r, f in zip(req, flo)), 3),
                           "max": round(max(r / f for r, f in zip(req, flo)), 3)},
        "ratio_with_heads": round(float(np.median(req) / np.median(np.add(flo, heads))), 3),
        "stages_ms": {s: pcts([t[s] / 1000 for t in stages]) for s in stages[0]},
        "floor_parts_ms": {s: pcts([p[s] for p in parts]) for s in parts[0]},
        "load_avg_1m": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_backbone_args(ap, pretrained=False)  # default: the shipped one; e.g. ViT-B-32 (random init)
    ap.add_argument("--world-queries", type=int, default=1000, help="the shipped gallery's size (x8 images)")
    ap.add_argument("--random-n", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--skip-world", action="store_true")
    ap.add_argument("--skip-random", action="store_true")
    a = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from cir_core.engine import Engine, load_engine
    from cir_core.settings import EngineConfig

    if a.backbone is None:
        world = load_engine(EngineConfig(world_queries=a.world_queries))  # the app's default setup
        bb, img = world.backbone, world.image(world.bench.reference_idx[0], 256)
        if not a.skip_world:
            print(json.dumps(run(world, f"world-test-{a.world_queries}", img, a.k, a.repeats)), flush=True)
    else:
        from cir_core.backbone import load_backbone
        from cir_core.world import build_benchmark

        bb = load_backbone(a.backbone, None)
        bench = build_benchmark("test", 1)
        img = bench.items[bench.reference_idx[0]].image(256)
    if not a.skip_random:
        g = np.random.default_rng(0).standard_normal((a.random_n, bb.dim), dtype=np.float32)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        rand = Engine.from_embeddings(bb, g, name=f"random-{a.random_n}")
        print(json.dumps(run(rand, f"random-{a.random_n}", img, a.k, a.repeats)), flush=True)


if __name__ == "__main__":
    main()
