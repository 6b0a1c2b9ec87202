"""Approximate (HNSW, IVF-Flat) vs exact (FAISS flat) search: shortlist recall and per-query latency.

Prints one JSON line per --ef-search value (and per --ivf-nprobe with --ivf-nlist).
Synthetic data: clustered unit vectors (a mixture of Gaussians on the sphere), because uniform
random vectors in high dimension are ANN's pathological case: every point is almost equally far
from every other (cosines ~N(0, 1/d)), so there is no neighbourhood structure for a graph or a
partition to exploit, unlike real image embeddings, which cluster by content. Queries are gallery
points plus noise, as a composed query lands near its target.
    python bench/bench_ann.py --n 100000 [--d 768 --queries 200 --shortlist 200 --ef-search 128,256,512
                                          --ivf-nlist 1024 --ivf-nprobe 16,32]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
import faiss  # noqa: E402

from cir_core.search import (  # noqa: E402
    DEFAULT_LAMBDA,
    Index,  # noqa: E402  (sets OMP_WAIT_POLICY before faiss loads)
    Queries,
    ScoreOpts,
    Searcher,
    gallery_norms,
    rank,
)


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def clustered_unit_vectors(n: int, d: int, clusters: int, rng: np.random.Generator,
                           spread: tuple[float, float] = (0.6, 1.2), chunk: int = 100_000) -> np.ndarray:
    """(n, d) float32 unit rows: centre c + Gaussian noise of norm ~s (s per cluster, from `spread`),
    renormalised; cluster sizes vary (Dirichlet(1) weights), as topics in a photo collection do."""
    centres = _normalise(rng.standard_normal((clusters, d), dtype=np.float32))
    sigma = rng.uniform(*spread, clusters).astype(np.float32) / np.sqrt(d)
    labels = rng.choice(clusters, n, p=rng.dirichlet(np.ones(clusters)))
    out = np.empty((n, d), np.float32)
    for a in range(0, n, chunk):  # chunked: the noise of 1M x 768 at once would double peak memory
        lab = labels[a:a + chunk]
        out[a:a + chunk] = _normalise(centres[lab] + rng.standard_normal((len(lab), d), dtype=np.float32)
                                      * sigma[lab, None])
    return out


def queries_near(x: np.ndarray, m: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """(m, d) unit queries: random rows of `x` plus isotropic noise of norm ~`noise`."""
    src = rng.integers(0, len(x), m)
    q = x[src] + rng.standard_normal((m, x.shape[1]), dtype=np.float32) * (noise / np.sqrt(x.shape[1]))
    return _normalise(q).astype(np.float32)


def numpy_shortlist(g: np.ndarray, q: np.ndarray, size: int) -> np.ndarray:
    """(B, size) rows with the highest inner product, unordered: one product + argpartition."""
    sims = q @ g.T
    return np.argpartition(sims, sims.shape[1] - size, axis=1)[:, sims.shape[1] - size:]


def recall_within(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean over queries of |found_i ∩ truth_i| / |truth_i|: (B, S) ids found, (B, k) true ids."""
    if found.shape[0] != truth.shape[0] or truth.shape[1] == 0:
        raise ValueError(f"found {found.shape} and truth {truth.shape} must be (B, S) and (B, k>0)")
    return float(np.mean([len(np.intersect1d(f, t)) / len(t) for f, t in zip(found, truth)]))


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: the first call pays thread-pool start-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--clusters", type=int, default=0, help="default: n / 1000 (at least 100)")
    ap.add_argument("--queries", type=int, default=200, help="for recall")
    ap.add_argument("--chord-queries", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--shortlist", type=int, default=200)
    ap.add_argument("--noise", type=float, default=0.5, help="query noise norm (0.5: cos ~0.9 to its source)")
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=40)
    ap.add_argument("--ef-search", type=lambda v: [int(e) for e in v.split(",")], default=[128],
                    help="comma-separated: one line per value (the graph is built once)")
    ap.add_argument("--ivf-nlist", type=int, default=0, help="also measure IVF-Flat with this many lists (default 0: not)")
    ap.add_argument("--ivf-nprobe", type=lambda v: [int(e) for e in v.split(",")], default=[16, 32])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main() -> None:
    a = build_parser().parse_args()

    load0 = round(os.getloadavg()[0], 2)  # the cores are shared: say how busy they were
    rng = np.random.default_rng(a.seed)
    clusters = a.clusters or max(100, a.n // 1000)
    t0 = time.perf_counter()
    x = clustered_unit_vectors(a.n, a.d, clusters, rng)
    q = queries_near(x, a.queries, a.noise, rng)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    flat = Index.build(x, "flat")
    flat_s = time.perf_counter() - t0
    del x  # the flat index holds the only copy from here (1M x 768 is 3 GB)
    g = faiss.rev_swig_ptr(flat._index.get_xb(), a.n * a.d).reshape(a.n, a.d)
    t0 = time.perf_counter()
    hnsw = Index.build(g, "hnsw", hnsw_m=a.hnsw_m, ef_search=a.ef_search[0], ef_construction=a.ef_construction)
    hnsw_s = time.perf_counter() - t0
    print(f"built: hnsw {hnsw_s:.1f} s, flat {flat_s:.1f} s", file=sys.stderr)

    _, exact = flat.search(q, a.shortlist)
    # Chord on the shortlist vs Chord over the whole gallery: reference = the query's nearest
    # gallery row, q_empty = the reference plus noise (the text-free composition lands near it).
    cq = q[:a.chord_queries]
    v_ref = g[exact[:a.chord_queries, 0]]
    q_empty = queries_near(v_ref, len(v_ref), a.noise, np.random.default_rng(a.seed + 1)) if len(v_ref) else v_ref
    chord = ScoreOpts("chord", DEFAULT_LAMBDA)
    norms = gallery_norms(g)
    chord_exact = rank(Queries(cq, q_empty, v_ref), Searcher(g, norms), chord, a.k)[1] if len(cq) else None
    # Two exact shortlists as references: FAISS's flat search, and one numpy product +
    # argpartition (what an exact search reads instead of a shortlist).
    searches = {"exact": lambda qb: flat.search(qb, a.shortlist),
                "exact_numpy": lambda qb: numpy_shortlist(g, qb, a.shortlist)}
    lat = {f"{name}_b{b}": round(_median_ms(lambda fn=fn, b=b: fn(q[:b]), a.repeats) / b, 3)
           for b in (1, 16) for name, fn in searches.items()}
    best = {b: min(lat[f"exact_b{b}"], lat[f"exact_numpy_b{b}"]) for b in (1, 16)}

    def report(ann: Index, params: dict, build_s: float) -> None:
        """One JSON line: `ann`'s recall and latency against the exact results above."""
        _, approx10 = ann.search(q, a.k)
        _, approx_s = ann.search(q, a.shortlist)  # HNSW searches with max(efSearch, k)
        approx = Searcher(g, norms, index=ann, shortlist=a.shortlist)
        chord_ids = rank(Queries(cq, q_empty, v_ref), approx, chord, a.k)[1] if len(cq) else None
        for b in (1, 16):
            lat[f"ann_b{b}"] = round(_median_ms(lambda b=b: ann.search(q[:b], a.shortlist), a.repeats) / b, 3)
        print(json.dumps({
            "bench": "ann", "index": ann.kind, "n": a.n, "d": a.d, "clusters": clusters, "queries": a.queries,
            "k": a.k, "shortlist": a.shortlist, "noise": a.noise, **params, "gen_s": round(gen_s, 1),
            "build_s": {"flat": round(flat_s, 1), ann.kind: round(build_s, 1)},
            "recall_at_k": round(recall_within(approx10, exact[:, :a.k]), 4),
            "shortlist_recall": round(recall_within(approx_s, exact[:, :a.k]), 4),
            "chord_recall_at_k": round(recall_within(chord_ids, chord_exact), 4) if len(cq) else None,
            "latency_ms_per_query": dict(lat),
            "speedup_b1": round(best[1] / lat["ann_b1"], 2),  # vs the faster exact path
            "speedup_b16": round(best[16] / lat["ann_b16"], 2),
            "omp_threads": faiss.omp_get_max_threads(), "load_avg_1m_start": load0,
        }), flush=True)

    for ef in a.ef_search:  # one graph, several search beams: one line each
        hnsw._index.hnsw.efSearch = ef
        report(hnsw, {"hnsw_m": a.hnsw_m, "ef_construction": a.ef_construction, "ef_search": ef}, hnsw_s)
    if a.ivf_nlist:  # the index build's default approximate index (docs/BENCHMARKS.md says why)
        del hnsw
        t0 = time.perf_counter()
        ivf = Index.build(g, "ivf-flat", nlist=a.ivf_nlist)
        ivf_s = time.perf_counter() - t0
        for nprobe in a.ivf_nprobe:
            ivf._index.nprobe = nprobe
            report(ivf, {"nlist": a.ivf_nlist, "nprobe": nprobe}, ivf_s)


if __name__ == "__main__":
    main()
