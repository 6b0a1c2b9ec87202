"""Exact top-k: FAISS flat `Index.search` vs the naive `q @ G.T` + full `np.argsort` per query.

Prints one JSON line. Random normalised data, so ties have probability ~0 and ids must agree.
    python bench/bench_topk.py [--n 100000 --d 512 --queries 16 --k 50 --repeats 5]
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
from cir_core.index import Index  # noqa: E402  (sets OMP_WAIT_POLICY before faiss loads)

import faiss  # noqa: E402


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def naive_topk(q: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """What a peer project does: score everything, sort everything, keep k."""
    scores = q @ g.T
    return np.stack([np.argsort(-row)[:k] for row in scores])


def _median_time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    g, q = _unit(rng, a.n, a.d), _unit(rng, a.queries, a.d)
    index = Index.build(g, kind="flat")
    index.search(q, a.k)  # warm-up: first call pays thread-pool start-up
    faiss_s, (_, ids) = _median_time(lambda: index.search(q, a.k), a.repeats)
    naive_s, naive_ids = _median_time(lambda: naive_topk(q, g, a.k), a.repeats)
    assert np.array_equal(ids, naive_ids), "FAISS and naive top-k disagree"
    print(json.dumps({
        "bench": "topk", "n": a.n, "d": a.d, "queries": a.queries, "k": a.k,
        "faiss_s": round(faiss_s, 6), "naive_s": round(naive_s, 6),
        "speedup": round(naive_s / faiss_s, 2), "omp_threads": faiss.omp_get_max_threads(),
    }))


if __name__ == "__main__":
    main()
