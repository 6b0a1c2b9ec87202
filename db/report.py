"""Annotation results per query set: method rates with CIs, comparisons, agreement, gold.

Per method x scoring: identity / edit rates at 1 and at k with query-level bootstrap CIs, paired
differences between methods, inter-annotator agreement, gold accuracy per annotator, and the
human identity rate beside the automatic identity@k with their agreement (db/human_auto.py).
Definitions: docs/ANNOTATION.md ("Results") and db/results.py.

    python -m db.report --db ann.sqlite [--set NAME] [--k K] [--json OUT] [--plot OUT.png]
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from cir_core.errors import CIRError, InputError
from cir_core.progress import bar as progress_bar
from cir_core.report_header import write_report
from cir_core.settings import add_seed_arg
from cir_core.stats import METHODS as CI_METHODS
from cir_core.stats import MIN_QUERIES_TRUSTED, bootstrap_ci, paired_bootstrap
from db.agreement import cohen_kappa, equal_count_units, fleiss_kappa, krippendorff_alpha_nominal
from db.human_auto import format_human_auto, human_vs_auto
from db.labels import final_labels, label_scores
from db.pairwise import format_pairwise, pairwise_report
from db.report_plot import report_figure, save_figure
from db.results import (
    SetData,
    item_scores,
    label_matrix,
    load_set,
    per_query_values,
    query_set_names,
)

__all__ = ["compute_report", "gold_accuracy", "report_figure", "format_report", "main"]

LABEL_KINDS = ("raw_majority", "adjudicated")  # the side-by-side of `labels` (db/labels.py)
AGGREGATION = ("per (query, item): mean over annotators who answered (identity yes=1, no=0, "
               "cant_tell=0; edit yes=1, partial=0.5, no=0; edit_strict yes-only); per query: "
               "rank-1 item (at_1) or mean over ranks 1..k (at_k), only if all of them are "
               "answered by >= 1 annotator; per method: mean over those queries, percentile "
               "bootstrap CI resampling queries. Skipped judgments excluded.")


def _num(x: float) -> float | None:
    """JSON has no NaN: undefined numbers become null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _num(v) if isinstance(v, float) else v for k, v in d.items()}


def _agreement(data: SetData, attr: str) -> dict[str, Any]:
    mat, annotators = label_matrix(data, attr)
    n_rated = (mat != None).sum(axis=1) if mat.size else np.zeros(0, int)  # noqa: E711
    shared = mat[n_rated >= 2]
    overlapping = [a for i, a in enumerate(annotators)
                   if shared.size and (shared[:, i] != None).any()]  # noqa: E711
    if len(overlapping) == 2:
        pair = mat[:, [annotators.index(a) for a in overlapping]]
        both = int((pair != None).all(axis=1).sum())  # noqa: E711
        cohen = {"value": _num(cohen_kappa(pair, missing=None)), "n_units": both,
                 "raters": overlapping}
    else:
        cohen = {"value": None, "n_units": 0, "raters": overlapping,
                 "note": f"needs exactly 2 overlapping annotators, found {len(overlapping)}"}
    out: dict[str, Any] = {"cohen_kappa": cohen}
    if mat.size:
        mask, m = equal_count_units(mat, missing=None)
        fleiss = _num(fleiss_kappa(mat[mask], missing=None)) if m else None
        alpha = _num(krippendorff_alpha_nominal(mat, missing=None))
    else:
        mask, m, fleiss, alpha = np.zeros(0, bool), 0, None, None
    out["fleiss_kappa"] = {"value": fleiss, "n_units": int(mask.sum()), "raters_per_unit": m}
    out["krippendorff_alpha"] = {"value": alpha, "n_units": int(shared.shape[0]),
                                 "n_values": int(n_rated[n_rated >= 2].sum())}
    return out


def _gold(data: SetData) -> list[dict[str, Any]]:
    per: dict[str, dict[str, Any]] = {}
    for j in data.judgments:
        if j.task_id not in data.gold:
            continue
        g = per.setdefault(j.annotator, {"annotator": j.annotator, "skipped": 0,
                                         "identity": [0, 0], "edit": [0, 0]})
        if j.status != "answered":
            g["skipped"] += 1
            continue
        for attr, gold_value in zip(("identity", "edit"), data.gold[j.task_id]):
            if gold_value is not None:
                g[attr][0] += int(getattr(j, attr) == gold_value)
                g[attr][1] += 1
    for g in per.values():
        for attr in ("identity", "edit"):
            correct, n = g[attr]
            g[attr] = {"correct": correct, "n": n, "accuracy": correct / n if n else None}
    return [per[a] for a in sorted(per)]


def _compared(data: SetData) -> list[str]:
    """Each question's first metric (identity, edit, relevance, ...): what comparisons and the
    raw-majority / adjudicated table are about."""
    return [q.metrics[0].name for q in data.questions if q.metrics]


def _review(data: SetData) -> dict[str, Any]:
    """How the set's labels stand: decided by reviewers (by reason), open ties, unjudged."""
    finals = final_labels(data)
    sources = Counter(f.source for f in finals.values())
    reasons = Counter(r for r, _ in data.adjudicated.values())
    kept = [all(f.majority.get(q.name) in (None, f.labels.get(q.name)) for q in data.questions)
            for t, f in finals.items() if f.source == "adjudicated" and f.n_answers and
            all(f.majority.get(q.name) is not None for q in data.questions)]
    return {"adjudicated": len(data.adjudicated), "by_reason": dict(reasons), "open_ties": sources["tie"],
            "majority": sources["majority"], "unjudged": sources["unjudged"],
            "reviewer_kept_majority": {"n": len(kept), "share": (sum(kept) / len(kept)) if kept else None}}


def _side_by_side(data: SetData, combos: list, depths: dict[str, int], n_boot: int, seed: int,
                  ci: str) -> list[dict[str, Any]]:
    """Per method x scoring and depth, each compared metric from the raw-majority labels and from
    the adjudicated ones (the reviewer's decision where there is one)."""
    finals = final_labels(data)
    scores = {"raw_majority": label_scores(data, finals, "majority"),
              "adjudicated": label_scores(data, finals, "adjudicated")}
    metrics = _compared(data)
    rows = []
    for combo in combos:
        entry: dict[str, Any] = {"method": combo[0], "scoring": combo[1]}
        for depth_name, depth in depths.items():
            entry[depth_name] = {}
            for kind, sc in scores.items():
                covered, values = per_query_values(data, sc, combo, depth, metrics)
                entry[depth_name][kind] = {m: _clean(bootstrap_ci(values[m], n_boot, seed, method=ci).as_dict())
                                           for m in metrics}
        rows.append(entry)
    return rows


def gold_accuracy(session: Session, query_set_name: str, annotator: str) -> dict[str, Any] | None:
    """One annotator's own gold line (`compute_report`'s "gold" entry), without the rest of the
    report; None when they judged no gold task of the set."""
    data = load_set(session, query_set_name)
    data.judgments = [j for j in data.judgments if j.annotator == annotator]
    mine = _gold(data)
    return mine[0] if mine else None


def _notes(methods: list[dict[str, Any]], ci: str) -> list[str]:
    """What the reader must know before trusting the intervals."""
    small = sorted({m["coverage"][d] for m in methods for d in ("at_1", "at_k")
                    if 0 < m["coverage"][d] < MIN_QUERIES_TRUSTED})
    if not small:
        return []
    return [f"Intervals over fewer than {MIN_QUERIES_TRUSTED} queries ({', '.join(map(str, small))} "
            f"here) are too narrow: at 12 queries a nominal 95 % interval covers about 0.89-0.92 "
            f"(percentile) or 0.90-0.93 (BCa) in bench/bootstrap_coverage.py. Read them as rough; "
            f"this report uses {ci}."]


def _paused_note(data: SetData) -> list[str]:
    if not data.paused_judgments:
        return []
    return [f"{data.paused_judgments} answers of paused annotators ({', '.join(data.paused)}) are left out "
            "of every rate and agreement (db.organiser resume brings them back)."]


def compute_report(session: Session, query_set_name: str, k: int | None = None,
                   n_boot: int = 2000, seed: int = 0, progress: bool = False,
                   ci: str = "percentile", annotators: bool = False) -> dict[str, Any]:
    """The full report of one query set as a JSON-serialisable dict (NaN -> None).

    `k` defaults to the set's pool depth and may not exceed it (deeper items were never pooled).
    `ci`: "percentile" (default) or "bca" intervals (cir_core/stats.py); `notes` says when the query
    count is too small for them to be trusted. `annotators`: add the organiser's per-annotator
    table (db.organiser; names every annotator: for organisers only). A pairwise set's report has
    win rates and a Bradley-Terry ranking (`pairwise`) instead of per-method rates.
    """
    if ci not in CI_METHODS:
        raise InputError(f"ci must be one of {CI_METHODS}, got {ci!r}")
    data = load_set(session, query_set_name)
    k = data.pool_k if k is None else k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= data.pool_k:
        raise InputError(f"k must be an int in 1..{data.pool_k} (the set's pool_k), got {k!r}")
    extra = {}
    if annotators:
        from db.organiser import annotator_report

        extra["annotators"] = annotator_report(session, query_set_name, n_boot=min(n_boot, 1000), seed=seed)
    if data.mode == "pairwise":
        return {**_base(data, k, n_boot, seed, ci, item_scores(data.judgments, {})), "methods": [],
                "comparisons": [], "notes": _paused_note(data),
                "pairwise": pairwise_report(data, k, n_boot, seed), **extra}
    scores = item_scores(data.judgments, data.metrics)
    compared = _compared(data)
    depths = {"at_1": 1, "at_k": k}
    methods, per_query = [], {}
    combos = sorted(data.rankings)
    for combo in progress_bar(combos, desc="methods", disable=not progress):
        entry: dict[str, Any] = {"method": combo[0], "scoring": combo[1], "coverage": {}}
        for depth_name, depth in depths.items():
            covered, values = per_query_values(data, scores, combo, depth)
            per_query[(combo, depth_name)] = dict(zip(covered, np.stack(
                [values[m] for m in compared], axis=1))) if covered else {}
            entry["coverage"][depth_name] = len(covered)
            entry[depth_name] = {m: _clean(bootstrap_ci(values[m], n_boot, seed, method=ci).as_dict())
                                 for m in data.metrics}
        methods.append(entry)
    comparisons = []
    pairs = list(itertools.combinations(combos, 2))
    for a, b in progress_bar(pairs, desc="comparisons", disable=not progress or not pairs):
        for depth_name in depths:
            qa, qb = per_query[(a, depth_name)], per_query[(b, depth_name)]
            shared = [q for q in qa if q in qb]
            for i, metric in enumerate(compared):
                x = np.array([qa[q][i] for q in shared], dtype=np.float64)
                y = np.array([qb[q][i] for q in shared], dtype=np.float64)
                comparisons.append({"a": "/".join(a), "b": "/".join(b), "depth": depth_name,
                                    "metric": metric,
                                    **_clean(paired_bootstrap(x, y, n_boot, seed, method=ci).as_dict())})
    return {
        **_base(data, k, n_boot, seed, ci, scores), "notes": _notes(methods, ci) + _paused_note(data),
        "methods": methods, "comparisons": comparisons,
        "labels": _side_by_side(data, combos, depths, n_boot, seed, ci),
        "human_vs_auto": human_vs_auto(data, scores, k, n_boot, seed, ci), **extra,
    }


def _base(data: SetData, k: int, n_boot: int, seed: int, ci: str, scores: dict) -> dict[str, Any]:
    """What every set's report has: the set, the judgments, agreement per question, gold, review."""
    skipped = [j for j in data.judgments if j.status == "skipped"]
    answered_tasks = {j.task_id for j in data.judgments if j.status == "answered"}
    return {
        "query_set": data.name, "source": data.source, "mode": data.mode, "audit_share": data.audit_share,
        "questions": [q.name for q in data.questions], "pool_k": data.pool_k,
        "overlap": data.overlap, "k": k, "n_boot": n_boot, "seed": seed, "ci": ci,
        "aggregation": AGGREGATION, "n_queries": len(data.query_ids),
        "judgments": {
            "answered": len(data.judgments) - len(skipped), "skipped": len(skipped),
            "skip_reasons": dict(Counter(j.skip_reason for j in skipped).most_common()),
            "annotators": len({j.annotator for j in data.judgments}),
            "tasks": len(data.task_of), "tasks_answered": len(answered_tasks),
            "paused_left_out": data.paused_judgments,
        },
        "agreement": {q.name: _agreement(data, q.name) for q in data.questions},
        "gold": _gold(data),
        "review": _review(data),
    }


def _fmt(ci: dict[str, Any]) -> str:
    if ci["mean"] is None:
        return "      n/a         "
    return f"{ci['mean']:.3f} [{ci['lo']:.3f},{ci['hi']:.3f}]"


def format_report(report: dict[str, Any]) -> str:
    """A plain-text rendering of `compute_report`'s dict, for the terminal."""
    r, lines = report, []
    j = r["judgments"]
    lines.append(f"== {r['query_set']} ({r['source']}): {r['n_queries']} queries, k={r['k']} "
                 f"(pool {r['pool_k']}), {j['annotators']} annotators, {j['answered']} answered, "
                 f"{j['skipped']} skipped, {j['tasks_answered']}/{j['tasks']} tasks answered")
    metrics = list(r["methods"][0]["at_1"]) if r["methods"] else []
    for depth in ("at_1", "at_k") if r["methods"] else ():
        label = "@1" if depth == "at_1" else f"@{r['k']}"
        lines.append(f"-- {label}: mean [95% CI] over queries; cov = queries covered")
        lines.append(f"{'method/scoring':28s} {'cov':>7s}  " + " ".join(f"{x:22s}" for x in metrics))
        for m in r["methods"]:
            cells = "  ".join(_fmt(m[depth][x]) for x in metrics)
            lines.append(f"{m['method'] + '/' + m['scoring']:28s} "
                         f"{m['coverage'][depth]:>3d}/{r['n_queries']:<3d}  {cells}")
    lines += _format_labels(r)
    if r["comparisons"]:
        lines.append("-- paired differences a - b (95% CI, P(diff>0), n shared queries)")
        for c in r["comparisons"]:
            d = ("n/a" if c["diff"] is None else
                 f"{c['diff']:+.3f} [{c['lo']:+.3f},{c['hi']:+.3f}] P>0={c['frac_positive']:.2f}")
            lines.append(f"{c['a']} - {c['b']} {c['depth']} {c['metric']}: {d} n={c['n']}")
    lines += [f"note: {n}" for n in r.get("notes", [])]
    lines.append("-- agreement (n/a = undefined: one category only, or too few raters)")
    for attr, ag in r["agreement"].items():
        parts = [f"{name}={'n/a' if v['value'] is None else round(v['value'], 3)} "
                 f"(units={v['n_units']})" for name, v in ag.items()]
        lines.append(f"{attr}: " + "  ".join(parts))
    lines += format_human_auto(r.get("human_vs_auto"), r["k"])
    if r.get("pairwise"):
        lines += format_pairwise(r["pairwise"])
    if r.get("annotators"):
        from db.organiser import format_annotators

        lines.append(format_annotators(r["annotators"]))
    if r["gold"]:
        lines.append("-- gold accuracy per annotator (correct/n)")
        for g in r["gold"]:
            lines.append(f"{g['annotator']}: identity {g['identity']['correct']}/"
                         f"{g['identity']['n']}  edit {g['edit']['correct']}/{g['edit']['n']}  "
                         f"skipped {g['skipped']}")
    return "\n".join(lines)


def _format_labels(r: dict[str, Any]) -> list[str]:
    """The review's state and the raw-majority vs adjudicated rates, side by side."""
    rv = r.get("review")
    if not rv:
        return []
    kept = rv["reviewer_kept_majority"]
    lines = [f"-- labels: {rv['adjudicated']} pairs decided by reviewers {rv['by_reason'] or ''}, "
             f"{rv['open_ties']} open ties (no majority, not decided), {rv['majority']} by majority, "
             f"{rv['unjudged']} unjudged" + (f"; reviewers kept the majority on {kept['share']:.3f} of "
                                             f"{kept['n']} decided pairs that had one" if kept["n"] else "")]
    rows = r.get("labels") or []
    if rows:
        metrics = list(rows[0]["at_1"]["raw_majority"])
        lines.append(f"-- raw majority vs adjudicated @{r['k']} (mean [95% CI] over queries)")
        lines.append(f"{'method/scoring':28s} " + " ".join(f"{m + ' ' + kind.split('_')[-1]:22s}"
                                                        for m in metrics for kind in LABEL_KINDS))
        for row in rows:
            cells = [_fmt(row["at_k"][kind][m]) for m in metrics for kind in LABEL_KINDS]
            lines.append(f"{row['method'] + '/' + row['scoring']:28s} " + " ".join(f"{c:22s}" for c in cells))
    return lines


def _plot_path(base: Path, name: str, several: bool) -> Path:
    if not several:
        return base
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
    return base.with_name(f"{base.stem}-{slug}{base.suffix or '.png'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m db.report", description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, help="the annotation DB: a SQLite file or a SQLAlchemy URL")
    p.add_argument("--set", dest="query_set", help="one query set (default: every set)")
    p.add_argument("--k", type=int, help="depth for the @k rates (default: the set's pool_k)")
    p.add_argument("--json", type=Path, help="write {'query_sets': [report, ...]} here")
    p.add_argument("--plot", type=Path, help="bar chart PNG (several sets: OUT-<set>.png each)")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (2000)")
    add_seed_arg(p, what="the bootstrap")
    p.add_argument("--ci", choices=CI_METHODS, default="percentile",
                   help="interval: percentile (default) or bca (bias-corrected, accelerated)")
    p.add_argument("--no-annotators", dest="annotators", action="store_false",
                   help="leave out the organiser's per-annotator table (db.organiser)")
    args = p.parse_args(argv)
    if "://" not in args.db and not Path(args.db).is_file():
        p.error(f"no such database file: {args.db}")
    from db.sqlite import open_db, session_factory  # the CLI alone needs an engine

    engine = open_db(args.db)
    try:
        with session_factory(engine)() as session:
            names = [args.query_set] if args.query_set else query_set_names(session)
            reports = [compute_report(session, n, args.k, args.bootstrap, args.seed,
                                      progress=True, ci=args.ci, annotators=args.annotators) for n in names]
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    if not reports:
        print("no query sets in this database", file=sys.stderr)
    for rep in reports:
        print(format_report(rep))
        if args.plot:
            out = _plot_path(args.plot, rep["query_set"], len(reports) > 1)
            save_figure(report_figure(rep), out)
            print(f"plot: {out}")
    if args.json:
        write_report(args.json, {"query_sets": reports}, allow_nan=False, benchmark=args.query_set or "every query set")
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
