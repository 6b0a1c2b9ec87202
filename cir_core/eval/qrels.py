"""TREC qrels and a scorer of any method's rankings against them, judged items only.

A qrels file has one line per judged (query, item): `qid 0 docno rel` (whitespace-separated, the
TREC format trec_eval and ir_measures read). `rel` is a graded label (0 = not relevant; the
annotation campaign writes 0-3, db/labels.py) or **-1: pooled but unjudged** (`db.export --format
qrels --pool-depth D`); an item of a ranking that the file does not list is unjudged too. (Note:
trec_eval counts -1 as judged non-relevant; drop those lines before using it.)

`score(qrels, rankings)` evaluates rankings — `python -m cir_core.eval --dump-rankings rk.jsonl`'s
lines (`method`, `scoring`, `query_id`, `top`), so a method that was never pooled can be scored on a
campaign's labels — over the queries the qrels judge, with an item relevant when `rel >=
min_rel`, per k:

- `unjudged@k`: the share of the top k that is unjudged (how far the labels reach this method);
- `R@k` three ways: `lower` (unjudged = not relevant), `condensed` (unjudged items removed from the
  ranking first: Sakai's condensed list), `upper` (unjudged = relevant); R@k is the share of
  queries with a relevant item in the top k (CIR's Recall@K), and the spread lower..upper is what
  the unjudged items leave open;
- `ndcg'@k`: nDCG on the condensed list with the graded labels;
- `bpref` (Buckley & Voorhees 2004, trec_eval's form): judged non-relevant items ranked above each
  relevant one, unjudged ignored; queries with no relevant item left out.

Intervals: percentile bootstrap resampling queries (cir_core.stats).

    python -m cir_core.eval.qrels --qrels q.txt --rankings rk.jsonl [--k 1,5,10] [--min-rel 2] \\
        [--json s.json] [--plot unjudged.png]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence, TypeGuard

import numpy as np

from cir_core.errors import CIRError, InputError
from cir_core.fileio import atomic_write, jsonl_objects
from cir_core.stats import bootstrap_ci

UNJUDGED = -1
Qrels = dict[str, dict[str, int]]  # qid -> docno -> rel
Rankings = dict[tuple[str, str], dict[str, list[str]]]  # (method, scoring) -> qid -> ranked docnos


def _token_problem(value: str) -> str | None:
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        return "must be non-empty text without spaces (qrels fields are whitespace-separated)"
    return None


def write_qrels(rows: Iterable[tuple[str, str, int]], path: str | Path) -> int:
    """Write `(qid, docno, rel)` rows as a qrels file (whole or not at all); the row count.
    InputError naming the row and the field when one cannot be written."""
    lines = []
    for i, (qid, docno, rel) in enumerate(rows):
        for key, v in (("qid", qid), ("docno", docno)):
            problem = _token_problem(v)
            if problem:
                raise InputError(f"qrels row {i} ({qid!r}, {docno!r}): {key} {v!r} {problem}")
        if isinstance(rel, bool) or not isinstance(rel, int) or rel < UNJUDGED:
            raise InputError(f"qrels row {i} ({qid!r}, {docno!r}): rel must be an int >= {UNJUDGED}, got {rel!r}")
        lines.append(f"{qid} 0 {docno} {rel}\n")
    atomic_write(Path(path), lambda f: f.writelines(lines), binary=False)
    return len(lines)


def read_qrels(path: str | Path) -> Qrels:
    """qid -> docno -> rel; InputError naming the file, the line and the field."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: qrels file not found")
    out: Qrels = {}
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise InputError(f"{p} line {n}: expected 'qid 0 docno rel', got {len(parts)} fields")
        qid, _, docno, rel = parts
        try:
            value = int(rel)
        except ValueError:
            raise InputError(f"{p} line {n}: rel {rel!r} is not an integer") from None
        if value < UNJUDGED:
            raise InputError(f"{p} line {n}: rel {value} is below {UNJUDGED} (-1 marks unjudged)")
        if docno in out.get(qid, {}):
            raise InputError(f"{p} line {n}: ({qid}, {docno}) is listed twice")
        out.setdefault(qid, {})[docno] = value
    if not out:
        raise InputError(f"{p}: no qrels lines")
    return out


def read_rankings(path: str | Path) -> Rankings:
    """`cir_core.eval --dump-rankings` lines as (method, scoring) -> qid -> ranked ids."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: rankings file not found")
    out: Rankings = {}
    for n, row in jsonl_objects(p.read_text(encoding="utf-8"), str(p), InputError):
        for key in ("method", "query_id", "top"):
            if key not in row:
                raise InputError(f"{p} line {n}: missing key {key!r}")
        top = row["top"]
        if not isinstance(top, list) or not all(isinstance(x, (str, int)) for x in top):
            raise InputError(f"{p} line {n}: key 'top' should be a list of item ids")
        combo = (str(row["method"]), str(row.get("scoring", "")))
        qid = str(row["query_id"])
        if qid in out.get(combo, {}):
            raise InputError(f"{p} line {n}: query {qid!r} of {combo[0]}/{combo[1]} is listed twice")
        out.setdefault(combo, {})[qid] = [str(x) for x in top]
    if not out:
        raise InputError(f"{p}: no rankings")
    return out


def _judged(rel: int | None) -> TypeGuard[int]:
    return rel is not None and rel != UNJUDGED


def _dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def query_metrics(judged: dict[str, int], ranking: list[str], ks: Sequence[int], min_rel: int) -> dict[str, float]:
    """One query's metrics (module docstring); NaN where undefined (bpref without a relevant item)."""
    out: dict[str, float] = {}
    rel = [judged.get(d) for d in ranking]
    condensed = [r for r in rel if _judged(r)]
    ideal = sorted((r for r in judged.values() if r != UNJUDGED), reverse=True)
    n_rel = sum(r >= min_rel for r in ideal)
    for k in ks:
        top = rel[:k]
        out[f"unjudged@{k}"] = sum(not _judged(r) for r in top) / k if k else 0.0
        out[f"R@{k}_lower"] = float(any(_judged(r) and r >= min_rel for r in top))
        out[f"R@{k}_upper"] = float(any((not _judged(r)) or r >= min_rel for r in top))
        out[f"R@{k}_condensed"] = float(any(r >= min_rel for r in condensed[:k]))
        idcg = _dcg([float(max(r, 0)) for r in ideal[:k]])
        out[f"ndcg'@{k}"] = _dcg([float(max(r, 0)) for r in condensed[:k]]) / idcg if idcg > 0 else float("nan")
    if n_rel == 0:
        out["bpref"] = float("nan")
    else:
        n_nonrel = sum(r < min_rel for r in ideal)
        denom = min(n_rel, n_nonrel)
        above, total = 0, 0.0
        for r in condensed:
            if r >= min_rel:
                total += 1.0 - (min(above, n_rel) / denom if denom else 0.0)
            else:
                above += 1
        out["bpref"] = total / n_rel
    return out


def score(qrels: Qrels, rankings: Rankings, ks: Sequence[int] = (1, 5, 10), min_rel: int = 2,
          n_boot: int = 2000, seed: int = 0) -> list[dict[str, Any]]:
    """Per (method, scoring): every metric's mean over the judged queries it ranks, with a
    bootstrap interval; `queries` judged, `missing` judged queries it has no ranking for."""
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise InputError(f"k values must be >= 1, got {ks}")
    out = []
    for (method, scoring), by_q in sorted(rankings.items()):
        per_q = [query_metrics(qrels[q], by_q[q], ks, min_rel) for q in sorted(qrels) if q in by_q]
        entry: dict[str, Any] = {"method": method, "scoring": scoring, "queries": len(per_q),
                                 "missing": sum(q not in by_q for q in qrels), "min_rel": min_rel, "metrics": {}}
        for name in (per_q[0] if per_q else {}):
            vals = np.array([m[name] for m in per_q], dtype=np.float64)
            vals = vals[np.isfinite(vals)]
            ci = bootstrap_ci(vals, n_boot, seed).as_dict()
            entry["metrics"][name] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                      for k, v in ci.items()}
        out.append(entry)
    return out


def format_scores(results: list[dict[str, Any]], ks: list[int]) -> str:
    def cell(c: dict) -> str:
        return "n/a" if c.get("mean") is None else f"{c['mean']:.3f} [{c['lo']:.3f},{c['hi']:.3f}]"

    lines = ["method/scoring                 queries  metric          mean [95% CI over queries]"]
    for r in results:
        name = f"{r['method']}/{r['scoring']}"
        for metric in [f"unjudged@{k}" for k in ks] + [f"R@{k}_{w}" for k in ks for w in ("lower", "condensed", "upper")] \
                + [f"ndcg'@{k}" for k in ks] + ["bpref"]:
            lines.append(f"{name:30s} {r['queries']:>7d}  {metric:15s} {cell(r['metrics'][metric])}")
    return "\n".join(lines)


def unjudged_figure(results: list[dict[str, Any]], ks: list[int]) -> Any:
    """How each method's unjudged share bounds its R@k: per method, R@k with unjudged counted
    not relevant, condensed, and counted relevant (with 95 % CIs), and the unjudged share of the
    top k (bars)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(results) + 1, 4.2), dpi=100, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(results), sharey=True))
    for ax, r in zip(axes, results):
        x = np.arange(len(ks))
        m = r["metrics"]
        ax.bar(x, [m[f"unjudged@{k}"]["mean"] or 0 for k in ks], 0.6, color="#dddddd", label="unjudged share of top k")
        for w, style in (("lower", "v-"), ("condensed", "o-"), ("upper", "^-")):
            ys = [m[f"R@{k}_{w}"] for k in ks]
            mean = np.array([c["mean"] if c["mean"] is not None else np.nan for c in ys])
            lo = np.array([c["lo"] if c["lo"] is not None else np.nan for c in ys])
            hi = np.array([c["hi"] if c["hi"] is not None else np.nan for c in ys])
            ax.errorbar(x, mean, yerr=np.clip(np.vstack([mean - lo, hi - mean]), 0, None), fmt=style, capsize=3,
                        label={"lower": "R@k, unjudged = not relevant", "condensed": "R@k, condensed (judged only)",
                               "upper": "R@k, unjudged = relevant"}[w])
        ax.set_xticks(x)
        ax.set_xticklabels([f"k={k}" for k in ks])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{r['method']}/{r['scoring']} ({r['queries']} queries)", fontsize=9)
    axes[0].set_ylabel(f"share of queries (relevant: grade >= {results[0]['min_rel']})")
    axes[0].legend(fontsize=7, loc="upper left")
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cir_core.eval.qrels", description=__doc__.splitlines()[0])
    ap.add_argument("--qrels", required=True, type=Path, help="qid 0 docno rel lines (-1: pooled, unjudged)")
    ap.add_argument("--rankings", required=True, type=Path, help="python -m cir_core.eval --dump-rankings output")
    ap.add_argument("--k", default="1,5,10", help="cut-offs (comma-separated)")
    ap.add_argument("--min-rel", type=int, default=2, help="the grade from which an item is relevant (default 2)")
    ap.add_argument("--methods", nargs="+", help="only these methods (default: every one in the rankings)")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", type=Path, help="write the scores here")
    ap.add_argument("--plot", type=Path, help="the unjudged-share figure here (PNG or PDF)")
    a = ap.parse_args(argv)
    try:
        ks = [int(x) for x in a.k.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--k must be comma-separated integers, got {a.k!r}")
    try:
        qrels, rankings = read_qrels(a.qrels), read_rankings(a.rankings)
        if a.methods:
            rankings = {c: v for c, v in rankings.items() if c[0] in a.methods}
            if not rankings:
                raise InputError(f"none of {a.methods} is in {a.rankings}")
        results = score(qrels, rankings, ks, a.min_rel, a.bootstrap)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_scores(results, ks))
    if a.json:
        from cir_core.report_header import write_report

        write_report(a.json, {"qrels": str(a.qrels), "rankings": str(a.rankings), "k": ks, "min_rel": a.min_rel,
                              "results": results}, allow_nan=False, benchmark=f"qrels {a.qrels.name}")
    if a.plot:
        fig = unjudged_figure(results, ks)
        fig.savefig(a.plot)
        print(f"plot: {a.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
