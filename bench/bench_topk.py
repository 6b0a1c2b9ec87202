"""Exact top-k over a gallery: the project's search against its peers, in the same process.

    python bench/bench_topk.py [--n 10000,100000,1000000] [--queries 1,7,16] [--d 512] [--k 50] [--repeats 9]
    python bench/bench_topk.py --calibrate [--n 8192,16384,32768,65536,100000,200000] [--queries 1,2,4,7,16,32,64]
    python bench/bench_topk.py --parts [--n 10000,100000] [--queries 1,7,16]   # where ours' time goes

For each (N, queries), on random unit vectors (ties have probability ~0, so every path must give
the same ids):
  - ours: `cir_core.search.rank(Queries(q), Searcher(g, norms, prefilter=...), cosine)`, what
    the app runs (the int8 filter where `cir_core.search.use_filter` picks it, else the float32 product;
    then `cir_core.search.topk`: ties to the lower row, exact); the gallery's norms and filter are built
    once, outside the timing, as the app builds them once at load;
  - float32: the same `rank` without the filter (the path the rule did not pick, or did);
  - full_sort: what the public ZS-CIR code does (`q @ G.T`, then a full argsort);
  - naive: the best naive (`q @ G.T`, `argpartition`, sort the k);
  - faiss: FAISS flat `IndexFlatIP.search` (blas threshold 20, as `cir_core.index` sets it).
Ours, float32 and the two peers run interleaved and rotated, `--repeats` times each; FAISS runs in its
own loop after them. One JSON line per (N, queries): each path's median and min/max in ms and
the ratios `full_sort / ours`, `naive / ours`, `faiss / ours` (> 1: ours is faster).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # as cir_core sets it; numpy reads it on import
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
from cir_core.search import (  # noqa: E402  # noqa: E402
    Index,  # noqa: E402  (sets OMP_WAIT_POLICY before faiss loads)
    Int8Filter,  # noqa: E402
    Queries,
    ScoreOpts,
    Searcher,
    gallery_norms,
    prefilter,
    rank,
    scoring,
)

COS = ScoreOpts("cosine")


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def full_sort(q: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """What a peer project does: score everything, sort everything, keep k."""
    return np.argsort(-(q @ g.T), axis=1)[:, :k]


def naive(q: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """The best naive: partition, then sort only the k."""
    s = q @ g.T
    part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    return np.take_along_axis(part, np.argsort(-np.take_along_axis(s, part, 1), axis=1), 1)


def same_up_to_rounding(q: np.ndarray, g: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Where two paths' ids differ, are the rows' exact (float64) scores equal to within float32
    rounding (1e-6), i.e. a near-tie that a BLAS product and a row-wise sum round differently?"""
    q64 = q.astype(np.float64)
    sa = np.einsum("bd,bkd->bk", q64, g[a].astype(np.float64))
    sb = np.einsum("bd,bkd->bk", q64, g[b].astype(np.float64))
    return bool(np.abs(sa - sb).max() <= 1e-6)


def measure(paths: dict, repeats: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for r in range(repeats):
        # interleaved, so each path sees the same machine load, and rotated, so no path always
        # runs right after FAISS (whose OpenMP threads leave the BLAS pool cold for the next call)
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = paths[name]
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def one(g: np.ndarray, index: Index, norms: np.ndarray, pf: Int8Filter | None, b: int, k: int,
        repeats: int, seed: int) -> dict:
    q = unit(np.random.default_rng(seed + b), b, g.shape[1])
    paths = {"ours": lambda: rank(Queries(q), Searcher(g, norms, prefilter=pf), COS, k).ids,
             "float32": lambda: rank(Queries(q), Searcher(g, norms), COS, k).ids,
             "full_sort": lambda: full_sort(q, g, k), "naive": lambda: naive(q, g, k)}
    faiss = {"faiss": lambda: index.search(q, k)[1]}
    ids = {name: fn() for name, fn in {**paths, **faiss}.items()}  # warm-up, and the answers to compare
    agree = all(np.array_equal(ids["ours"], v) for v in ids.values())
    near = all(same_up_to_rounding(q, g, ids["ours"], v) for v in ids.values())
    # The peers the goals name run interleaved; FAISS, a reference only, in its own loop after
    # them: its OpenMP pool slows the BLAS call that follows it (ours by ~0.3 ms at 10k, measured)
    times = {**measure(paths, repeats), **measure(faiss, repeats)}
    med = {n: float(np.median(t)) for n, t in times.items()}
    return {"bench": "topk", "n": len(g), "d": g.shape[1], "queries": b, "k": k, "repeats": repeats,
            "ms": {n: {"median": round(med[n], 3), "min": round(min(t), 3), "max": round(max(t), 3)}
                   for n, t in times.items()},
            "vs_full_sort": round(med["full_sort"] / med["ours"], 2), "vs_naive": round(med["naive"] / med["ours"], 2),
            "vs_faiss": round(med["faiss"] / med["ours"], 2), "same_ids": agree,
            "same_up_to_float32_rounding": near,
            "path": "int8 filter" if pf is not None and prefilter.use_filter(len(g), b) else "float32",
            "load_avg_1m": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d")}


def calibrate(g: np.ndarray, norms: np.ndarray, pf: Int8Filter, b: int, k: int, repeats: int,
              seed: int) -> dict:
    """The filter against the float32 product for one (N, queries): the data for `use_filter`."""
    q = unit(np.random.default_rng(seed + b), b, g.shape[1])
    rule = prefilter.FILTER_RULE
    prefilter.FILTER_RULE = ((0, 1 << 30),)  # force the filter
    try:
        paths = {"filter": lambda: rank(Queries(q), Searcher(g, norms, prefilter=pf), COS, k).ids,
                 "float32": lambda: rank(Queries(q), Searcher(g, norms), COS, k).ids}
        a, b_ = paths["filter"](), paths["float32"]()
        agree, near = np.array_equal(a, b_), same_up_to_rounding(q, g, a, b_)
        times = measure(paths, repeats)
    finally:
        prefilter.FILTER_RULE = rule
    med = {n: float(np.median(t)) for n, t in times.items()}
    return {"bench": "topk_rule", "n": len(g), "d": g.shape[1], "queries": b, "k": k, "repeats": repeats,
            "ms": {n: round(m, 3) for n, m in med.items()}, "float32_over_filter": round(med["float32"] / med["filter"], 2),
            "rule_picks": "filter" if prefilter.use_filter(len(g), b) else "float32",
            "faster": min(med, key=med.get), "same_ids": agree, "same_up_to_float32_rounding": near,
            "load_avg_1m": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d")}


def parts(g: np.ndarray, norms: np.ndarray, pf: Int8Filter | None, b: int, k: int, repeats: int,
          seed: int) -> dict:
    """Where the time goes, in `one`'s conditions (interleaved with the peers): numpy's float32
    product alone (`q @ G.T`, what the peers pay before their selection, and ours too for one
    query or more than `_MKL_MAX_QUERIES`; for 2-64 ours takes torch's MKL product instead, so no
    `ours_beyond_product_ms` is printed there) and, where the filter exists, its int8 kernel
    alone and the exact re-score of one search's candidates alone.
    `ceiling_vs_full_sort` = full sort / kernel: what a search reading the codes could reach if
    everything around the kernel were free."""
    q = unit(np.random.default_rng(seed + b), b, g.shape[1])
    paths = {"ours": lambda: rank(Queries(q), Searcher(g, norms, prefilter=pf), COS, k).ids,
             "full_sort": lambda: full_sort(q, g, k), "naive": lambda: naive(q, g, k),
             "product": lambda: q @ g.T}
    if pf is not None:
        u, zp, scale = prefilter._query_grid(q)
        grid = (u - zp) * scale
        rows = pf.search(q, g, norms, k, np.full(b, -1))[0]
        qb, cand = np.nonzero(rows >= 0)[0], rows[rows >= 0]
        paths["kernel"] = lambda: prefilter._kernel(grid, scale, zp, pf.packed)
        paths["rescore"] = lambda: prefilter._exact(g, norms, q, qb, cand)
    times = measure(paths, repeats)
    med = {n: float(np.median(t)) for n, t in times.items()}
    out = {"bench": "topk_parts", "n": len(g), "d": g.shape[1], "queries": b, "k": k,
           "repeats": repeats, "path": "int8 filter" if pf is not None and prefilter.use_filter(len(g), b) else "float32",
           "ms": {n: {"median": round(m, 3), "min": round(min(times[n]), 3), "max": round(max(times[n]), 3)}
                  for n, m in med.items()},
           "naive_beyond_product_ms": round(med["naive"] - med["product"], 3)}
    if pf is not None:
        out.update(candidates_per_query=round(len(cand) / b, 1),
                   ours_beyond_kernel_ms=round(med["ours"] - med["kernel"], 3),
                   ceiling_vs_full_sort=round(med["full_sort"] / med["kernel"], 2))
    elif not 1 < b <= scoring._MKL_MAX_QUERIES:  # ours pays this very product
        out["ours_beyond_product_ms"] = round(med["ours"] - med["product"], 3)
    out.update(vs_full_sort=round(med["full_sort"] / med["ours"], 2),
               load_avg_1m=round(os.getloadavg()[0], 2), date=time.strftime("%Y-%m-%d"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="10000,100000,1000000")
    ap.add_argument("--queries", default="1,7,16")
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibrate", action="store_true", help="time the filter against float32 for the rule")
    ap.add_argument("--parts", action="store_true", help="time the product, kernel and re-score alone")
    a = ap.parse_args()
    for n in (int(x) for x in a.n.split(",")):
        g = unit(np.random.default_rng(a.seed), n, a.d)
        norms = gallery_norms(g)
        pf = Int8Filter.build(g, norms)
        if a.calibrate:
            if pf is None:
                sys.exit("no int8 kernel on this machine: nothing to calibrate")
            for b in (int(x) for x in a.queries.split(",")):
                print(json.dumps(calibrate(g, norms, pf, b, a.k, a.repeats, a.seed)), flush=True)
            continue
        if a.parts:
            for b in (int(x) for x in a.queries.split(",")):
                use = pf if pf is not None and prefilter.use_filter(n, b) else None
                print(json.dumps(parts(g, norms, use, b, a.k, a.repeats, a.seed)), flush=True)
            continue
        index = Index.build(g, kind="flat")
        for b in (int(x) for x in a.queries.split(",")):
            print(json.dumps(one(g, index, norms, pf, b, a.k, a.repeats, a.seed)), flush=True)
        del g, index, pf


if __name__ == "__main__":
    main()
