"""Seed tables and the claims' intervals: each method's checkpoints of every seed on the world's
test split, in one process.

    python -m training.seed_report --seeds 0,1,2 [--benchmark world|films] [--n-queries 1000] [--json seeds.json] [--md seeds.md]
        [--methods pace --keep docs/results/seeds_films.json]   # re-measure one method, keep the other rows

Seed 0 is the shipped checkpoint, seed s > 0 the one `python -m training.build_assets --seeds`
wrote under runs/seeds/<method>/s<s>/. Reported:

- every metric per (method, scoring) as mean ± sample std over the seeds;
- the claims as paired bootstrap 95 % intervals over queries, each query's outcome averaged over
  the seeds (queries are the unit: the seeds share them): PACT − compose-only on identity@1 and
  R@10, Chord − cosine on R@10 and identity@1 for every method, every method − the sum baseline
  on R@10 and R@1 under each scoring; beside each, the per-seed differences (mean ± std);
- the progression under the prefix protocol (sentences 1..k only): the share of k → k+1 steps on
  which the target's rank improved or held, per seed and with a query-bootstrap interval.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.errors import CIRError, InputError
from cir_core.report_header import write_report

METHODS = ("pact", "compose-only", "dice", "pace")
BASELINE = "sum"
METRICS = ("R@1", "R@10", "Rs@1", "mAP@10", "identity@1", "edit@1")
SCORINGS = ("cosine", "chord")
N_BOOT = 2000


def mean_std(values: list[float]) -> dict[str, Any]:
    """{"mean", "std" (sample, ddof=1; 0 for one value), "values"}."""
    v = np.asarray(values, float)
    return {"mean": round(float(v.mean()), 4), "std": round(float(v.std(ddof=1)) if len(v) > 1 else 0.0, 4),
            "values": [round(float(x), 4) for x in v]}


def seed_checkpoints(methods: tuple[str, ...], seeds: list[int]) -> dict[int, dict[str, str]]:
    """seed -> {method: checkpoint folder}; every one must exist."""
    from .build_assets import seed_export

    out = {s: {m: str(seed_export(m, s)) for m in methods} for s in seeds}
    missing = [f"{m} seed {s} ({p})" for s, by in out.items() for m, p in by.items() if not Path(p).is_dir()]
    if missing:
        raise InputError(f"no checkpoint for {', '.join(missing)}: train them with "
                         f"python -m training.build_assets --seeds {','.join(map(str, seeds))}")
    return out


def evaluate_seeds(seeds: list[int], n_queries: int, methods: tuple[str, ...] = METHODS,
                   progress: bool = True, benchmark: str = "world") -> dict[str, Any]:
    """Every (method, seed, scoring) on the test split of the world (or the films'): metrics,
    per-query outcomes and prefix-protocol step ranks (the baseline once: it has no seeds)."""
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import evaluate
    from cir_core.paths import DEFAULT_BACKBONE

    ckpts = seed_checkpoints(methods, seeds)
    backbone = load_backbone(DEFAULT_BACKBONE)
    bench = load_benchmark(benchmark, split="test", n_queries=n_queries, image_size=backbone.image_size,
                           progression=True)
    runs: dict[str, Any] = {}
    for s in seeds:
        names = list(methods) + ([BASELINE] if s == seeds[0] else [])
        report, raw = evaluate(bench, backbone, names, SCORINGS, checkpoints=ckpts[s], progress=progress)
        if report.get("skipped"):
            raise InputError(f"seed {s}: methods could not be built: {report['skipped']}")
        for (m, sc), res in raw.items():
            runs[f"{m}|{sc}|{s}"] = {"metrics": report["results"][m][sc], "per_query": res.aux["per_query"],
                                     "steps": res.aux.get("progression_ranks", {}).get("prefix")}
    return {"runs": runs, "backbone": backbone.id, "n_queries": bench.n_queries()}


def _claim(runs: dict, a: tuple[str, str], b: tuple[str, str], metric: str, seeds: list[int]) -> dict[str, Any]:
    from cir_core.stats import paired_bootstrap

    sa = [s for s in seeds if f"{a[0]}|{a[1]}|{s}" in runs] or [seeds[0]]
    sb = [s for s in seeds if f"{b[0]}|{b[1]}|{s}" in runs] or [seeds[0]]
    va = np.mean([runs[f"{a[0]}|{a[1]}|{s}"]["per_query"][metric] for s in sa], 0)
    vb = np.mean([runs[f"{b[0]}|{b[1]}|{s}"]["per_query"][metric] for s in sb], 0)
    d = paired_bootstrap(va, vb, n_boot=N_BOOT, seed=0)
    per_seed = [runs[f"{a[0]}|{a[1]}|{s}"]["metrics"][metric] - runs[f"{b[0]}|{b[1]}|{sb[0] if len(sb) == 1 else s}"]
                ["metrics"][metric] for s in sa]
    return {"a": "/".join(a), "b": "/".join(b), "metric": metric, "diff": round(d.diff, 4), "lo": round(d.lo, 4),
            "hi": round(d.hi, 4), "frac_positive": round(d.frac_positive, 4), "n_queries": d.n,
            "per_seed_diff": mean_std(per_seed)}


def claims(runs: dict, seeds: list[int], methods: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    if {"pact", "compose-only"} <= set(methods):
        for sc in SCORINGS:
            for metric in ("identity@1", "R@10"):
                out.append(_claim(runs, ("pact", sc), ("compose-only", sc), metric, seeds))
    for m in (*methods, BASELINE):
        for metric in ("R@10", "identity@1"):
            out.append(_claim(runs, (m, "chord"), (m, "cosine"), metric, seeds))
    for m in methods:  # every trained method against the untrained sum, scoring for scoring
        for sc in SCORINGS:
            for metric in ("R@10", "R@1"):
                out.append(_claim(runs, (m, sc), (BASELINE, sc), metric, seeds))
    return out


def progression(runs: dict, seeds: list[int], methods: tuple[str, ...]) -> dict[str, Any]:
    """Prefix protocol, per method and scoring: the share of k -> k+1 steps whose target rank
    improved or held, per seed and (seed-averaged per query) with a ratio bootstrap interval."""
    from cir_core.stats import bootstrap_means

    out: dict[str, Any] = {}
    for m in (*methods, BASELINE):
        for sc in SCORINGS:
            held, live, per_seed = [], None, []
            for s in seeds:
                run = runs.get(f"{m}|{sc}|{s}")
                if run is None or run["steps"] is None:
                    continue
                ranks, n = run["steps"]
                ok = (ranks[:, 1:] <= ranks[:, :-1]) & (np.arange(1, ranks.shape[1])[None, :] < n[:, None])
                held.append(ok.sum(1).astype(float))
                live = (n - 1).astype(float)
                per_seed.append(float(held[-1].sum() / live.sum()))
            if not held:
                continue
            h = np.mean(held, 0)
            boot = bootstrap_means(h, N_BOOT, 0) / bootstrap_means(live, N_BOOT, 0)  # the same draws
            lo, hi = np.quantile(boot, [0.025, 0.975])
            out[f"{m}/{sc}"] = {"step_improved_or_held": mean_std(per_seed), "pooled": round(float(h.sum() / live.sum()), 4),
                                "lo": round(float(lo), 4), "hi": round(float(hi), 4), "queries": int(len(live))}
    return out


def build(seeds: list[int], n_queries: int, methods: tuple[str, ...] = METHODS, progress: bool = True,
          benchmark: str = "world") -> dict:
    got = evaluate_seeds(seeds, n_queries, methods, progress, benchmark)
    runs = got["runs"]
    tables: dict[str, Any] = {}
    for m in (*methods, BASELINE):
        for sc in SCORINGS:
            ss = [s for s in seeds if f"{m}|{sc}|{s}" in runs]
            tables.setdefault(m, {})[sc] = {k: mean_std([runs[f"{m}|{sc}|{s}"]["metrics"][k] for s in ss])
                                            for k in METRICS if k in runs[f"{m}|{sc}|{ss[0]}"]["metrics"]}
    return {"date": time.strftime("%Y-%m-%d"), "benchmark": benchmark, "seeds": seeds, "split": "test",
            "n_queries": got["n_queries"],
            "backbone": got["backbone"], "n_boot": N_BOOT, "tables": tables,
            "claims": claims(runs, seeds, methods), "progression_prefix": progression(runs, seeds, methods)}


SAME = ("benchmark", "split", "seeds", "n_queries", "backbone", "n_boot")


def claim_key(c: dict) -> tuple[str, str, str]:
    return c["a"], c["b"], c["metric"]


def merge(old: dict, new: dict) -> dict:
    """`new` (some methods re-measured) laid over `old` (an earlier report of the same benchmark,
    seeds, queries and backbone): a table row, claim or progression row comes from `new` when
    `new` has it, else from `old`; `kept` names the methods whose rows are `old`'s, and from when."""
    for k in SAME:
        if old.get(k) != new.get(k):
            raise InputError(f"--keep: the earlier report has {k} {old.get(k)!r}, this run {new.get(k)!r}")
    kept = sorted(set(old["tables"]) - set(new["tables"]))
    claims_ = {claim_key(c): c for c in old["claims"]} | {claim_key(c): c for c in new["claims"]}
    return {**new, "tables": {m: new["tables"].get(m, t) for m, t in old["tables"].items()} | new["tables"],
            "claims": list(claims_.values()), "progression_prefix": old["progression_prefix"] | new["progression_prefix"],
            "kept": {"methods": kept, "date": old.get("kept", {}).get("date", old["date"])} if kept else {}}


def format_markdown(rep: dict) -> str:
    pm = lambda d: f"{100 * d['mean']:.1f} ± {100 * d['std']:.1f}"  # noqa: E731
    where = {"world": "World", "films": "Film"}.get(rep.get("benchmark", "world"), rep.get("benchmark"))
    lines = [f"{where} test split, {rep['n_queries']} queries, seeds {rep['seeds']} ({rep['date']}, backbone "
             f"{rep['backbone']}); mean ± sample std over seeds, in %."
             + (f" The rows of {', '.join(rep['kept']['methods'])} are kept from the report of {rep['kept']['date']}"
                " (their checkpoints unchanged since); the others re-measured." if rep.get("kept") else ""), "",
             "| method | scoring | " + " | ".join(METRICS) + " |", "|---|---|" + "---:|" * len(METRICS)]
    for m, by in rep["tables"].items():
        for sc, t in by.items():
            lines.append(f"| {m} | {sc} | " + " | ".join(pm(t[k]) if k in t else "–" for k in METRICS) + " |")
    lines += ["", "| claim | metric | diff | 95 % interval (queries) | per-seed diff |", "|---|---|---:|---|---:|"]
    for c in rep["claims"]:
        lines.append(f"| {c['a']} − {c['b']} | {c['metric']} | {100 * c['diff']:+.1f} | "
                     f"[{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}] | {pm(c['per_seed_diff'])} |")
    lines += ["", "| method/scoring | steps improved or held (prefix) | pooled | 95 % interval |", "|---|---:|---:|---|"]
    for k, p in rep["progression_prefix"].items():
        lines.append(f"| {k} | {pm(p['step_improved_or_held'])} | {100 * p['pooled']:.1f} | "
                     f"[{100 * p['lo']:.1f}, {100 * p['hi']:.1f}] |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.seed_report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated (seed 0: the shipped checkpoints)")
    ap.add_argument("--n-queries", type=int, default=1000)
    ap.add_argument("--benchmark", default="world", choices=("world", "films"), help="whose test split")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--json", type=Path, help="write the report here")
    ap.add_argument("--md", type=Path, help="write the tables here (Markdown)")
    ap.add_argument("--keep", type=Path, help="an earlier report (JSON): the rows of the methods not measured now "
                    "are kept from it (when only some methods' checkpoints changed)")
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        if not seeds or len(set(seeds)) != len(seeds):
            raise InputError(f"--seeds must list distinct seeds, got {args.seeds!r}")
        old = json.loads(args.keep.read_text()) if args.keep else None  # read before the long run
        rep = build(seeds, args.n_queries, methods, benchmark=args.benchmark)
        rep = merge(old, rep) if old is not None else rep
    except (CIRError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = format_markdown(rep)
    if args.json:
        write_report(args.json, rep)
    if args.md:
        args.md.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
