"""Milvus against the in-process FAISS IVF path, side by side on the same vectors: build time,
shortlist recall@50 against exact search, Chord top-10 agreement with exact Chord, p50/p95 query
latency and the app side's resident memory (issue 46).

    nice -n 10 .venv/bin/python bench/bench_milvus.py --n 1000000 [--d 512 --queries 200 --data random
        --milvus-index IVF_FLAT,HNSW --jsonl docs/results/bench.jsonl]
    .venv/bin/python bench/bench_milvus.py --rescore     # the re-score of one shortlist alone

Milvus runs as a server in its own process (Milvus Lite's, `python -m milvus_lite server`: the
Milvus protocol on a port, the engine in Python over FAISS), written by the project's own writer
(`cir_core.index.milvus.MilvusTarget`, what `python -m cir_core.index build --backend milvus`
runs on the shards) and searched by the project's `RemoteSearcher` (the shortlist with its
vectors, re-scored exactly). FAISS is `cir_core.search.Index` "ivf-flat" (nlist = the power of two
nearest 4 sqrt(N), nprobe 32: the index build's default), searched by the app's `Searcher`. Each
app side runs in a child process that opens only what the app opens (the FAISS index file and the
memory-mapped embeddings; a Milvus connection), so its resident memory is the app's.

Queries as in bench_ann.py: a random gallery row (the reference, excluded from its ranking) plus
noise of norm 0.5 is the composed query q; the reference plus other noise of norm 0.5 is q_empty.
Exact answers: cosine top-50 and Chord top-10 (λ 0.34) over the whole gallery, in this process.
Latency: one query at a time, shortlist + exact re-score (`rank`), after 5 warm-up queries.
`--data random`: uniform random unit vectors (ANN's hardest case: no neighbourhood structure);
`--data clustered`: bench_ann.py's mixture of Gaussians (n / 1000 clusters).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
from cir_core.search import DEFAULT_LAMBDA, Index, Queries, ScoreOpts, Searcher, ivf_lists, rank  # noqa: E402  (sets OMP_WAIT_POLICY before faiss loads)  # noqa: E402

COS, CHORD = ScoreOpts("cosine"), ScoreOpts("chord", DEFAULT_LAMBDA)
WARMUP = 5


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def random_unit(n: int, d: int, rng: np.random.Generator, chunk: int = 100_000) -> np.ndarray:
    out = np.empty((n, d), np.float32)
    for a in range(0, n, chunk):
        out[a:a + chunk] = unit(rng.standard_normal((min(chunk, n - a), d), dtype=np.float32))
    return out


def rss() -> dict[str, int]:
    """This process's resident memory (bytes): total, anonymous, file-backed (mapped files)."""
    return status(os.getpid())


def status(pid: int) -> dict[str, int]:
    got = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            got[key] = int(value.split()[0]) * 1024
    return got


# -- the app side (a child process) -----------------------------------------------------------------
def child(kind: str, work: Path, target: str, nprobe: int) -> None:
    """Open what the app opens, answer every query one at a time, print ids, latencies and RSS
    (before opening: after importing what the app imports, torch included)."""
    import cir_core.engine  # noqa: F401  (the app's imports: the same baseline for both sides)
    from cir_core.index import milvus  # noqa: F401  (the Milvus opener)

    z = np.load(work / "queries.npz")
    q, qe, vr, ref = z["q"], z["qe"], z["vr"], z["ref"]
    before = rss()
    t0 = time.perf_counter()
    store = None
    if kind == "faiss":
        g = np.load(work / "vectors.npy", mmap_mode="r")  # as an index folder's embeddings.npy
        index = Index.load(work / "ivf.faiss")
        index._index.nprobe = nprobe  # noqa: SLF001  (one index, several search widths)
        searcher = Searcher.for_gallery(g, index=index)
    else:
        from cir_core.gallery_spec import GalleryContext, open_gallery_spec
        from cir_core.search import RemoteSearcher

        store = open_gallery_spec(target, GalleryContext()).store
        searcher = RemoteSearcher(store)
    open_s = time.perf_counter() - t0
    opened = rss()
    cos50, chord10, t_cos, t_chord, t_bare = [], [], [], [], []
    for i in range(-WARMUP, len(q)):
        j = i % len(q)
        one = Queries(q[j:j + 1], qe[j:j + 1], vr[j:j + 1])
        t = time.perf_counter()
        a = rank(one, searcher, COS, 50, np.array([ref[j]]))
        t_cos.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = rank(one, searcher, CHORD, 10, np.array([ref[j]]))
        t_chord.append(time.perf_counter() - t)
        if store is not None:  # the same search without the vectors: what carrying them costs
            t = time.perf_counter()
            store.client.search(store.collection, data=q[j:j + 1].tolist(), limit=201, output_fields=[],
                                search_params=store.index.search_params(201), timeout=store.timeout)
            t_bare.append(time.perf_counter() - t)
        if i >= 0:
            cos50.append(a.ids[0].tolist())
            chord10.append(b.ids[0].tolist())
    print(json.dumps({"kind": kind, "open_s": round(open_s, 2), "searcher": repr(searcher), "rss_before": before,
                      "rss_opened": opened, "rss_after": rss(), "cos_s": t_cos[WARMUP:], "chord_s": t_chord[WARMUP:],
                      "bare_search_s": t_bare[WARMUP:],
                      "cos50": cos50, "chord10": chord10}))


def run_child(kind: str, work: Path, target: str = "", nprobe: int = 32) -> dict:
    """The child's JSON, or {"error": its last lines} when it failed."""
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--work", str(work), "--target", target,
                          "--nprobe", str(nprobe)], capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:500] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the parent --------------------------------------------------------------------------------------
@dataclass
class FakeBackbone:
    """What the Milvus writer reads of a backbone: its id and dimension."""

    id: str
    dim: int


def overlap(found: list[list[int]], truth: np.ndarray) -> float:
    """Mean share of each query's true ids that were found."""
    return float(np.mean([len(set(f) & set(t.tolist())) / len(t) for f, t in zip(found, truth)]))


def ms(seconds: list[float]) -> dict[str, float]:
    s = sorted(seconds)
    return {"p50": round(1000 * statistics.median(s), 2), "p95": round(1000 * s[int(0.95 * (len(s) - 1))], 2),
            "min": round(1000 * s[0], 2), "max": round(1000 * s[-1], 2)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, window: float = 15.0, quiet: float = 1.0, most: float = 3600.0) -> float:
    """Seconds until process `pid` is idle (under `quiet` CPU seconds in `window`): Milvus Lite
    compacts segments and builds their indexes in the background after the last flush, and
    searches a segment without its index exhaustively until then (describe_index already says
    Finished)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < most:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < quiet:
            break
    return round(time.monotonic() - t0, 1)


def start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    import socket

    from cir_core.index.milvus import connect

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(folder / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(folder / "milvus.db"),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            connect(uri, timeout=2).close()
            return proc, uri
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.3)
    raise SystemExit((folder / "server.log").read_text()[-2000:])


def rescore_cost(dims: tuple[int, ...] = (512, 768), size: int = 200, repeats: int = 200) -> None:
    """What Chord's exact re-score of one query's shortlist costs in the app, apart from the
    search: `rank` over `size` rows already in memory, and turning the hits' vectors from the
    Python lists pymilvus returns into one float32 array (the client's share of carrying them)."""
    rng = np.random.default_rng(0)
    for d in dims:
        g = random_unit(10_000, d, rng)
        sub = Searcher.exact(g[:size])
        one = Queries(unit(g[:1] + 0.1), unit(g[:1] + 0.2), g[:1])
        lists = g[:size].tolist()
        times = {"chord_k10": [], "cosine_k50": [], "decode": []}
        for _ in range(repeats):
            t = time.perf_counter()
            rank(one, sub, CHORD, 10, np.array([0]))
            times["chord_k10"].append(time.perf_counter() - t)
            t = time.perf_counter()
            rank(one, sub, COS, 50, np.array([0]))
            times["cosine_k50"].append(time.perf_counter() - t)
            t = time.perf_counter()
            np.asarray(lists, np.float32)
            times["decode"].append(time.perf_counter() - t)
        print(json.dumps({"bench": "milvus_rescore", "date": time.strftime("%Y-%m-%d %H:%M"),
                          "loadavg": os.getloadavg(), "d": d, "shortlist": size, "repeats": repeats,
                          "bytes": size * d * 4, **{k: ms(v) for k, v in times.items()}}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", choices=("random", "clustered"), default="random")
    ap.add_argument("--milvus-index", default="IVF_FLAT", help="comma-separated Milvus index types to build")
    ap.add_argument("--nprobe", type=int, default=32, help="Milvus IVF lists searched (per segment)")
    ap.add_argument("--faiss-nprobe", default="32,128", help="FAISS IVF lists searched: one line each "
                    "(32: the index build's default; 128: about the share of the vectors Milvus Lite's "
                    "per-segment IVF scans with nprobe 32 at 1M)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a Milvus call may take (the app's: 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--jsonl", type=Path, default=None, help="append the JSON lines here too")
    ap.add_argument("--rescore", action="store_true", help="only time the exact re-score of a 200-row "
                    "shortlist and the decoding of its vectors (d 512 and 768)")
    ap.add_argument("--child", choices=("faiss", "milvus"), help=argparse.SUPPRESS)
    ap.add_argument("--target", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.work, a.target, a.nprobe)
    if a.rescore:
        return rescore_cost()

    from cir_core.gallery import Gallery, GalleryItem
    from cir_core.index.milvus import MilvusIndex, MilvusTarget
    from cir_core.index.shards import Shard

    work = a.work or Path(tempfile.mkdtemp(prefix="bench-milvus-"))
    work.mkdir(parents=True, exist_ok=True)
    head = {"bench": "milvus", "date": time.strftime("%Y-%m-%d %H:%M"), "loadavg_start": os.getloadavg(),
            "n": a.n, "d": a.d, "queries": a.queries, "data": a.data, "cpus": os.cpu_count()}
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    if a.data == "random":
        g = random_unit(a.n, a.d, rng)
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_ann import clustered_unit_vectors

        g = clustered_unit_vectors(a.n, a.d, max(100, a.n // 1000), rng)
    ref = rng.choice(a.n, a.queries, replace=False)
    vr = g[ref]
    q = unit(vr + rng.standard_normal(vr.shape, dtype=np.float32) * (0.5 / np.sqrt(a.d)))
    qe = unit(vr + rng.standard_normal(vr.shape, dtype=np.float32) * (0.5 / np.sqrt(a.d)))
    np.save(work / "vectors.npy", g)
    np.savez(work / "queries.npz", q=q, qe=qe, vr=vr, ref=ref)
    head["gen_s"] = round(time.perf_counter() - t0, 1)
    print(f"vectors and queries in {work} ({head['gen_s']} s)", file=sys.stderr)

    t0 = time.perf_counter()
    exact = Searcher.exact(g)
    both = Queries(q, qe, vr)
    truth50 = rank(both, exact, COS, 50, ref).ids
    truth_chord = rank(both, exact, CHORD, 10, ref).ids
    head["exact_s"] = round(time.perf_counter() - t0, 1)
    del exact
    print(f"exact answers in {head['exact_s']} s", file=sys.stderr)

    def report(kind: str, what: str, build_s: float, got: dict, base: dict, server: dict | None = None) -> None:
        """One JSON line (printed, and appended to --jsonl) as soon as a path is measured."""
        line = {**head, "loadavg_now": os.getloadavg(), "path": kind, "what": what, "build_s": build_s}
        if "error" in got:
            line["error"] = got["error"]
            print(json.dumps(line), flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps(line) + "\n")
            return
        line |= {"open_s": got["open_s"], "searcher": got["searcher"], "settle_s": got.get("settle_s"),
                "shortlist_recall_at_50": round(overlap(got["cos50"], truth50), 4),
                "chord_top10_agreement": round(overlap(got["chord10"], truth_chord), 4),
                "latency_ms": {"cosine_k50": ms(got["cos_s"]), "chord_k10": ms(got["chord_s"]),
                               **({"search_without_vectors": ms(got["bare_search_s"])}
                                  if got["bare_search_s"] else {})},
                "chord_p50_vs_faiss": round(statistics.median(got["chord_s"]) / statistics.median(base["chord_s"]), 2),
                "app_rss_mb": {k: round(v / 2**20) for k, v in got["rss_after"].items()},
                # what opening the gallery and answering the queries added to the app's process
                "app_rss_growth_mb": round((got["rss_after"]["VmRSS"] - got["rss_before"]["VmRSS"]) / 2**20)}
        if server is not None:
            line["server_rss_mb"] = {w: {k: round(v / 2**20) for k, v in st.items()} for w, st in server.items()}
        print(json.dumps(line), flush=True)
        if a.jsonl:
            with open(a.jsonl, "a") as f:
                f.write(json.dumps(line) + "\n")

    t0 = time.perf_counter()
    nlist = ivf_lists(a.n)
    Index.build(g, "ivf-flat", nlist=nlist, nprobe=a.nprobe).save(work / "ivf.faiss")
    faiss_s = round(time.perf_counter() - t0, 1)
    print(f"FAISS IVF{nlist} built in {faiss_s} s", file=sys.stderr)
    base = None
    for nprobe in (int(x) for x in a.faiss_nprobe.split(",")):
        got = run_child("faiss", work, nprobe=nprobe)
        base = base or got
        report(f"faiss-nprobe{nprobe}", f"FAISS IVF{nlist},Flat nprobe {nprobe} (in process)", faiss_s, got, base)

    proc, uri = start_server(work)
    try:
        items = [GalleryItem(f"{i:07d}", None, {"fingerprint": str(i)}) for i in range(a.n)]
        src = Gallery("bench", items)
        size = 4096
        bounds = [(s, min(s + size, a.n)) for s in range(0, a.n, size)]

        def load(s: int) -> Shard:
            lo, hi = bounds[s]
            return Shard(lo, hi, np.arange(lo, hi), g[lo:hi], [], np.ones(hi - lo, np.float32))

        bb = FakeBackbone(f"bench-{a.data}-{a.d}", a.d)
        for kind in a.milvus_index.split(","):
            index = MilvusIndex.from_flags(kind, nlist=None, nprobe=a.nprobe, hnsw_m=16, ef_construction=200,
                                           ef_search=256)
            target = MilvusTarget(uri, f"bench_{kind.lower()}", index)
            target.check(bb)
            t0 = time.perf_counter()
            target.write(src, [it.meta["fingerprint"] for it in items], load, [hi - lo for lo, hi in bounds], bb,
                         {"source": "bench", "source_kind": "manifest", "name": "bench", "digest": "bench",
                          "image_size": 0, "world_queries": 0, "skipped": 0}, progress=True)
            build_s = round(time.perf_counter() - t0, 1)
            target.client.close()
            settle_s = settle(proc.pid)
            print(f"Milvus server idle {settle_s} s after the build returned", file=sys.stderr)
            loaded = status(proc.pid)
            got = run_child("milvus", work, f"milvus:bench_{kind.lower()}@{uri}?timeout={a.timeout:g}")
            report(kind, f"Milvus {kind} {dict(target.index.params)} {dict(index.search)} (server process)",
                   build_s, got | {"settle_s": settle_s}, base, {"loaded": loaded, "after": status(proc.pid)})
    finally:
        proc.terminate()
        proc.wait(timeout=120)
        if a.work is None:  # a temporary folder of several GB
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
