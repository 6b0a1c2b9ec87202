"""Where does the per-sentence progression fail? Each step k -> k+1 of the `prefix` protocol
(the method given sentences 1..k, then 1..k+1; the rank of the query's best-ranked ground truth
after each) is one observation: did the rank improve or hold? The steps are broken down by the
added sentence's op family (films: scene / spatial / pose / relation / attribute; the world: its
op), by its place in the text (1 -> 2, 2 -> 3, later) and by the rank before the step, each rate
with a query-level bootstrap 95 % interval (a query's steps are resampled together). For the
steps that worsen, the median factor rank_after / rank_before says how far.

    python -m studies.progression_failures [--benchmark films|world] [--split test|val] [--methods pace,pact,sum]
        [--n-films N] [--scoring cosine] [--backbone local-dir:DIR] [--checkpoint pace=DIR] [--json p.json]

The overall rate equals `progression_summary`'s `step_improved_or_held` for the same ranks (the
module checks it), so the breakdown explains exactly the number the benchmark reports.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from cir_core.errors import InputError
from cir_core.report_header import write_report
from cir_core.settings import add_backbone_args
from cir_core.stats import rate_by_group

from .cli import checkpoint_arg, checkpoint_args

RANK_EDGES = (0, 1, 10, 100, 1000)  # rank before the step: 0 | 1-9 | 10-99 | 100-999 | 1000+
STEP_LABELS = ("1->2", "2->3", "3+")  # the step's place: sentences 1 -> 1..2, 1..2 -> 1..3, later


def step_table(ranks: np.ndarray, n_steps: np.ndarray, families: Sequence[Sequence[str]]
               ) -> dict[str, np.ndarray]:
    """Every real step k -> k+1 as rows: query index, the added sentence's family, k, rank before,
    rank after. `ranks` (Q, W) 0-based ranks after each prefix (a shorter query repeats its last),
    `n_steps` (Q,), `families[j]` one family per sentence of query j (its first one is unused)."""
    r, n = np.asarray(ranks), np.asarray(n_steps).reshape(-1)
    if r.ndim != 2 or n.shape != (r.shape[0],) or len(families) != r.shape[0]:
        raise InputError(f"ranks (Q, W), n_steps (Q,) and one family list per query do not fit: "
                         f"{r.shape}, {n.shape}, {len(families)}")
    qi, fam, at, before, after = [], [], [], [], []
    for j, (fs, k) in enumerate(zip(families, n)):
        if len(fs) != k:
            raise InputError(f"query row {j} has {k} steps but {len(fs)} sentence families")
        for s in range(1, int(k)):
            qi.append(j)
            fam.append(fs[s])
            at.append(s)
            before.append(r[j, s - 1])
            after.append(r[j, s])
    return {"query": np.array(qi, np.int64), "family": np.array(fam, dtype=object),
            "k": np.array(at, np.int64), "before": np.array(before, np.int64), "after": np.array(after, np.int64)}


def breakdown(steps: dict[str, np.ndarray], n_boot: int = 2000, seed: int = 0) -> dict:
    """The share of steps whose rank improved or held, overall, per family, per place in the text
    (k -> k+1 for k = 1, 2, 3 or later) and per rank-before bin, and over every family but one,
    each with its query-bootstrap interval; and how far the worsening steps worsen."""
    ok = steps["after"] <= steps["before"]
    if not len(ok):
        raise InputError("no progression steps: the benchmark has no multi-sentence query")
    qi = steps["query"]
    fams = sorted(set(steps["family"].tolist()))
    fam_idx = np.array([fams.index(f) for f in steps["family"]], np.int64)
    bins = np.searchsorted(np.asarray(RANK_EDGES), steps["before"], side="right") - 1
    labels = [f"{lo}-{hi - 1}" if hi - lo > 1 else str(lo) for lo, hi in zip(RANK_EDGES, RANK_EDGES[1:])]
    labels.append(f"{RANK_EDGES[-1]}+")
    place = np.minimum(steps["k"], len(STEP_LABELS)) - 1
    worse = ~ok
    factor = (steps["after"][worse] + 1) / (steps["before"][worse] + 1)  # ranks are 0-based
    return {"steps": int(len(ok)), **_row(rate_by_group(qi, np.zeros_like(qi), ok, 1, n_boot, seed)[0]),
            "by_family": {f: _row(r) for f, r in zip(fams, rate_by_group(qi, fam_idx, ok, len(fams), n_boot, seed))},
            # the rate over every other family's steps: what the progression would be without f
            "without_family": {f: _row(rate_by_group(qi, (fam_idx != j).astype(np.int64), ok, 2, n_boot, seed)[1])
                               for j, f in enumerate(fams)},
            "by_step": {b: _row(r) for b, r in
                        zip(STEP_LABELS, rate_by_group(qi, place, ok, len(STEP_LABELS), n_boot, seed))},
            "by_rank_before": {b: _row(r) for b, r in zip(labels, rate_by_group(qi, bins, ok, len(labels), n_boot, seed))},
            "worsened": int(worse.sum()),
            "median_worsening_factor": round(float(np.median(factor)), 3) if worse.any() else None}


def _row(r: dict) -> dict:
    return {"steps": r["n"], "improved_or_held": r["rate"], "ci95": r["ci95"]}


def sentence_families(queries: Sequence, rows: Sequence[int]) -> list[list[str]]:
    """One family per sentence of each multi-sentence query (one sentence per edit, as the world
    and the films write them); an InputError names a query where that does not hold."""
    from cir_core.world.films.language import OP_FAMILY
    from cir_core.world.films.queries import FilmQuery

    out = []
    for i in rows:
        q = queries[i]
        if len(q.sentences) != len(q.edits):
            raise InputError(f"query {q.query_id}: {len(q.sentences)} sentences but {len(q.edits)} edits, "
                             "so its steps have no op family")
        out.append([OP_FAMILY[e.op] if isinstance(q, FilmQuery) else e.op for e in q.edits])
    return out


def method_breakdown(bench, method, data, scoring: str = "cosine", n_boot: int = 2000) -> dict:
    """One method's progression steps on `bench` (built with progression=True), broken down."""
    from cir_core.eval.loop import score_method
    from cir_core.metrics import progression_summary
    from cir_core.search.scoring import ScoreOpts

    (res,), _ = score_method(bench, method, data, [ScoreOpts(scoring)])
    ranks, n = res.aux["progression_ranks"]["prefix"]
    queries, rows = bench.world.queries, bench.progression_rows()  # the benchmark's own rule
    # its ranks must be of those rows, one step per sentence; refuse a drift by name
    if len(rows) != len(n) or any(len(queries[i].sentences) != k for i, k in zip(rows, n)):
        raise InputError(f"the benchmark's progression rows ({len(n)}) are not its multi-sentence queries "
                         f"({len(rows)}): progression_failures and the benchmark disagree on which queries count")
    out = breakdown(step_table(ranks, n, sentence_families(queries, rows)), n_boot)
    expect = progression_summary(ranks, n)["step_improved_or_held"]
    if abs(out["improved_or_held"] - expect) > 1e-4:
        raise AssertionError(f"step rate {out['improved_or_held']} != the benchmark's {expect}")
    return out


def main(argv: list[str] | None = None) -> int:
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method
    from cir_core.paths import DEFAULT_BACKBONE

    ap = argparse.ArgumentParser(prog="python -m studies.progression_failures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", default="films", choices=("films", "world"))
    ap.add_argument("--methods", default="pace,pact,dice,compose-only,sum")
    ap.add_argument("--scoring", default="cosine", choices=("cosine", "chord"))
    ap.add_argument("--split", default="test", choices=("test", "val"),
                    help="val to diagnose a candidate before any test (default: test)")
    ap.add_argument("--n-queries", type=int, default=None, help="default: the split's (test 1000, val 500)")
    ap.add_argument("--n-films", type=int, default=None, help="films: default 104 (test), 24 (val)")
    add_backbone_args(ap, default=DEFAULT_BACKBONE, pretrained=False)
    ap.add_argument("--checkpoint", action="append", default=[], metavar="METHOD=DIR",
                    help="a method's checkpoint folder instead of the shipped one (repeatable)")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    names = [m.strip() for m in a.methods.split(",") if m.strip()]
    pairs = [checkpoint_arg(ap, c) for c in a.checkpoint]
    folders = checkpoint_args(ap, pairs, names, a.backbone != DEFAULT_BACKBONE)
    bb = load_backbone(a.backbone)
    bench = load_benchmark(a.benchmark, split=a.split, n_queries=a.n_queries, n_films=a.n_films,
                           image_size=bb.image_size, progression=True)
    data = embed_benchmark(bench, bb)
    results = {}
    for name in names:
        r = results[name] = method_breakdown(bench, create_method(name, bb, folders.get(name)), data,
                                             a.scoring, a.bootstrap)
        fam = ", ".join(f"{f} {v['improved_or_held']} [{v['ci95'][0]}, {v['ci95'][1]}] ({v['steps']})"
                        for f, v in r["by_family"].items())
        without = ", ".join(f"{f} {v['improved_or_held']}" for f, v in r["without_family"].items())
        place = ", ".join(f"{b} {v['improved_or_held']} ({v['steps']})" for b, v in r["by_step"].items())
        print(f"{name}/{a.scoring}: {r['steps']} steps, improved or held {r['improved_or_held']} "
              f"[{r['ci95'][0]}, {r['ci95'][1]}]; by family: {fam}; without one family: {without}; "
              f"by step: {place}; worsened {r['worsened']}, median factor x{r['median_worsening_factor']}")
    if a.json:
        write_report(a.json, {"benchmark": a.benchmark, "split": a.split, "n_films": a.n_films,
                              "n_queries": len(bench.world.queries), "scoring": a.scoring,
                              "backbone": bb.id, "checkpoints": {k: v or "shipped" for k, v in folders.items()},
                              "rank_edges": list(RANK_EDGES), "methods": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
