"""What batching can give at most on this machine: the parts of b concurrent Compare requests done
one request at a time against done in one batch, in one process, on the load bench's setups
(`load_compare.py`: ViT-B-32 at random init over 100k random vectors, or the world).

For each repeat, b requests (b gallery references, b new two-sentence edits) are run part by part
both ways, alternating which goes first:
  - `frozen_texts`: the frozen text tower over each request's texts (edit, empty edit, sentences);
  - one part per method of the app's columns: `compose` (q) and `compose_empty` (q_∅) of its rows
    (the texts memoised by the part before, as in the app);
  - `search`: each request's queries (every method's q) ranked under Chord, with each query's own
    q_∅ and reference.
`amortisation` = one-at-a-time / batched time of a part: what a perfect batch queue could save
there. `ceiling` = the sum of one-at-a-time times / the sum of batched times: the most throughput
batching can add to the engine's work (the Gradio queue, the transport and PACE's per-sentence
progression, which is not batched, come on top of both). `--profile` prints cProfile's top
functions of one unbatched request too.

    python bench/load_ceiling.py [--setup vitb32] [--batch 4,16] [--repeats 5]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.load_compare import prepare_vitb32, uptime  # noqa: E402


def build_engine(setup: str, work: Path, n: int, batching: bool = False):
    """The engine the load bench's app builds (batching off: the parts are called directly)."""
    from cir_core.engine import load_engine
    from cir_core.settings import EngineConfig

    if setup == "world":
        return load_engine(EngineConfig(batching=batching))
    flags = dict(zip(*[iter(prepare_vitb32(work, n))] * 2))
    return load_engine(EngineConfig(backbone=flags["--backbone"], gallery=flags["--gallery"],
                                    checkpoints=flags["--checkpoints"], batching=batching))


def engine_load(engines: dict, threads: int, per_thread: int, repeats: int) -> dict:
    """`threads` callers of `Engine.compare` at once, `per_thread` requests each, on the batched
    engine and on the unbatched one (two at a time, as the app's Gradio queue lets them), ABBA:
    the throughput ratio without Gradio in the way, and the batch queue's statistics."""
    import threading

    def run(engine, width: int, tag: str) -> float:
        gate = threading.Semaphore(width)
        rng = np.random.default_rng(len(tag))

        def caller(c: int) -> None:
            for r in range(per_thread):
                ref = engine.view.reference_from_row(int(rng.integers(len(engine.view))))
                with gate:
                    engine.compare(ref, f"Move the character {c} steps left and {r} up for {tag}. "
                                        "Make the square blue.", k=8, scoring="chord")

        ts = [threading.Thread(target=caller, args=(c,)) for c in range(threads)]
        t0, c0 = time.perf_counter(), time.process_time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        cpu[engine is engines[True]].append((time.process_time() - c0) / (threads * per_thread))
        return threads * per_thread / (time.perf_counter() - t0)

    rps: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}  # CPU seconds per request
    for r in range(repeats):
        for b in ((True, False) if r % 2 == 0 else (False, True)):
            rps[b].append(run(engines[b], threads if b else 2, f"t{threads}-r{r}-{b}"))
    st = engines[True].batch.stats
    ratios = [a / b for a, b in zip(rps[True], rps[False])]
    return {"bench": "load_ceiling_engine", "threads": threads, "per_thread": per_thread,
            "rps_on": [round(x, 3) for x in rps[True]], "rps_off": [round(x, 3) for x in rps[False]],
            "on_over_off": {"median": round(float(np.median(ratios)), 2), "min": round(min(ratios), 2),
                            "max": round(max(ratios), 2)},
            "cpu_s_per_request_on": [round(x, 3) for x in cpu[True]],
            "cpu_s_per_request_off": [round(x, 3) for x in cpu[False]],
            "batch_stats": {"batches": st.batches, "tickets_per_batch": round(st.tickets / max(st.batches, 1), 2),
                            "items_per_batch": round(st.items / max(st.batches, 1), 2), "largest": st.largest},
            "load_1m": round(os.getloadavg()[0], 2)}


def requests(engine, b: int, tag: str):
    """b (reference Refs, edit, texts) with new edits."""
    from cir_core.methods.refs import Refs
    from cir_core.text import split_sentences

    rows = np.random.default_rng(len(tag)).choice(len(engine.view), b, replace=False)
    out = []
    for i, row in enumerate(rows):
        edit = f"Move the character {i} steps left for {tag}. Make the square blue."
        v = engine.view.embeddings[row][None].astype(np.float32)
        out.append((Refs(v, np.array([np.nan], np.float32)), int(row), edit,
                    list(dict.fromkeys([edit, "", *split_sentences(edit)]))))
    return out


def parts_once(engine, reqs, together: bool) -> dict[str, float]:
    """Seconds of each part for `reqs`, batched or one request at a time."""
    from cir_core.engine.batched import stack_refs
    from cir_core.search import Queries, ScoreOpts, rank

    memo, out = engine.memo, {}
    groups = [reqs] if together else [[r] for r in reqs]
    t = time.perf_counter()
    for g in groups:
        engine.backbone.encode_texts([x for r in g for x in r[3]])
    out["frozen_texts"] = time.perf_counter() - t
    memo.prefetch([x for r in reqs for x in r[3]])  # untimed: what the first part computed, memoised
    qs: dict[str, list] = {}
    for name in engine.methods.default():
        m = engine.methods.get(name)
        t = time.perf_counter()
        for g in groups:
            refs = stack_refs([r[0] for r in g])
            qs.setdefault(name, []).append((m.compose(refs, [r[2] for r in g]), m.compose_empty(refs)))
        out[name] = time.perf_counter() - t
    opts = ScoreOpts("chord", 0.34)
    t = time.perf_counter()
    for gi, g in enumerate(groups):
        q = np.concatenate([qs[name][gi][0] for name in qs])
        q0 = np.concatenate([qs[name][gi][1] for name in qs])
        v_r = np.concatenate([np.repeat(r[0].emb, 1, 0) for r in g] * len(qs))
        exclude = np.array([r[1] for r in g] * len(qs))
        rank(Queries(q, q0, v_r), engine.searcher, opts, 8, exclude)
    out["search"] = time.perf_counter() - t
    return out


def measure(engine, b: int, repeats: int) -> dict:
    sep, tog = [], []
    parts_once(engine, requests(engine, b, f"warm-{b}"), True)  # lazy builds, thread pools
    for r in range(repeats):
        for together in ((True, False) if r % 2 else (False, True)):
            p = parts_once(engine, requests(engine, b, f"b{b}-r{r}-{together}"), together)
            (tog if together else sep).append(p)
    med = lambda rows, key: float(np.median([p[key] for p in rows]))  # noqa: E731
    parts = {key: {"one_at_a_time_ms": round(med(sep, key) * 1000, 1), "batched_ms": round(med(tog, key) * 1000, 1),
                   "amortisation": round(med(sep, key) / med(tog, key), 2)} for key in sep[0]}
    ratios = [sum(s.values()) / sum(t.values()) for s, t in zip(sep, tog)]
    return {"bench": "load_ceiling", "b": b, "repeats": repeats, "parts": parts,
            "ceiling": {"median": round(float(np.median(ratios)), 2), "min": round(min(ratios), 2),
                        "max": round(max(ratios), 2)},
            "load_1m": round(os.getloadavg()[0], 2)}


def profile(engine, top: int = 18) -> str:
    """cProfile's top functions (by own time) of one unbatched request."""
    ref = engine.view.reference_from_row(1)
    engine.compare(ref, "Make it red. Move it left.", k=8, scoring="chord")
    pr = cProfile.Profile()
    pr.enable()
    engine.compare(ref, "Make the square green. Move the character to the right.", k=8, scoring="chord")
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", default="vitb32", help="vitb32 or world")
    ap.add_argument("--batch", default="4,16")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--work", default="/tmp/cir-load-compare")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="also: this many callers of the engine at once")
    ap.add_argument("--per-thread", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    engine = build_engine(a.setup, Path(a.work), a.n)
    print(json.dumps({"bench": "load_ceiling", "setup": a.setup, "engine": repr(engine), "uptime": uptime(),
                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}), flush=True)
    for b in (int(x) for x in a.batch.split(",")):
        print(json.dumps({"setup": a.setup, **measure(engine, b, a.repeats)}), flush=True)
    if a.profile:
        print(profile(engine), flush=True)
    if a.threads:
        engines = {False: engine, True: build_engine(a.setup, Path(a.work), a.n, batching=True)}
        for e in engines.values():
            e.warm_up()
        print(json.dumps({"setup": a.setup, **engine_load(engines, a.threads, a.per_thread, a.repeats)}), flush=True)
    print(json.dumps({"bench": "load_ceiling", "end_uptime": uptime()}), flush=True)


if __name__ == "__main__":
    main()
