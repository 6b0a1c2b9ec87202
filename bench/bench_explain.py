"""What "why this result" costs a Compare request: `Engine.compare` with `explained=False` (no
breakdown, no map: the request before issue 44) and with `explained=True` (each hit's cosine and
Chord terms and ranks over the whole gallery, q_∅ for every method under cosine too, the map),
on the same reference and edit, back to back, in one process, as ratios.

Each repeat takes a new gallery reference (so no method has its q_∅ cached: the breakdown's worst
case, a first look at a reference) and a new edit (the text memo is cleared before each request).
The request without the breakdown runs first; it never composes q_∅ under cosine, so it leaves
nothing the second can reuse. Prints one JSON line per gallery.

    python bench/bench_explain.py [--world-queries 1000] [--random-n 100000] [--k 8] [--repeats 15]
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
from bench_compare import prepare_methods  # noqa: E402  (bench/ is this script's folder)

from cir_core.search import Index  # noqa: E402,F401  (sets OMP_WAIT_POLICY before faiss loads)

EDIT = "Make the square blue. Move the character {i} steps to the left."


def once(engine, row: int, text: str, k: int, explained: bool) -> tuple[float, dict]:
    engine.memo.clear()
    ref = engine.view.reference_from_row(row)
    t0 = time.perf_counter()
    res = engine.compare(ref, text, k=k, explained=explained)
    took = time.perf_counter() - t0
    assert all(m.ok for m in res.methods), [m.error for m in res.methods if not m.ok]
    assert (res.map is not None) == explained
    return took, res.timings


def pcts(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1000
    return {"p50": round(float(np.percentile(a, 50)), 2), "p95": round(float(np.percentile(a, 95)), 2)}


def run(engine, label: str, k: int, repeats: int) -> dict:
    random_init = prepare_methods(engine)
    n = len(engine.view.gallery)
    once(engine, n - 1, EDIT.format(i=-1), k, True)  # warm-up: thread pools, lazy imports
    off, on, explain_ms = [], [], []
    for i in range(repeats):
        row, text = (i * 7919) % (n - 1), EDIT.format(i=i)
        off.append(once(engine, row, text, k, False)[0])
        took, timings = once(engine, row, text, k, True)
        on.append(took)
        explain_ms.append(timings["explain"])
    ratios = [b / a for a, b in zip(off, on)]
    return {"bench": "explain", "gallery": label, "n": n, "dim": engine.backbone.dim, "backbone": engine.backbone.id,
            "search": engine.searcher.kind, "k": k, "repeats": repeats, "methods": engine.methods.default(),
            "random_init": random_init, "request_ms_without": pcts(off), "request_ms_with": pcts(on),
            "explain_stage_ms": {"p50": round(float(np.median(explain_ms)), 2),
                                 "p95": round(float(np.percentile(explain_ms, 95)), 2)},
            "ratio_with_over_without": round(float(np.median(on) / np.median(off)), 3),
            "ratio_each_pair": {"min": round(min(ratios), 3), "median": round(float(np.median(ratios)), 3),
                                "max": round(max(ratios), 3)},
            "load_avg_1m": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d %H:%M")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-queries", type=int, default=1000, help="the shipped gallery's size (x8 images)")
    ap.add_argument("--random-n", type=int, default=100_000, help="a random unit gallery of this size (0: none)")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from cir_core.engine import Engine, load_engine
    from cir_core.settings import EngineConfig

    world = load_engine(EngineConfig(world_queries=a.world_queries))  # the app's default setup
    print(json.dumps(run(world, f"world-test-{a.world_queries}", a.k, a.repeats)), flush=True)
    if a.random_n:
        g = np.random.default_rng(0).standard_normal((a.random_n, world.backbone.dim), dtype=np.float32)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        rand = Engine.from_embeddings(world.backbone, g, name=f"random-{a.random_n}", checkpoints=world.methods.checkpoints)
        print(json.dumps(run(rand, f"random-{a.random_n}", a.k, a.repeats)), flush=True)


if __name__ == "__main__":
    main()
