"""The organiser's view of a campaign: per annotator, how far, how fast, how well — each with an
interval — how that drifts over the campaign, and pausing someone.

Per annotator of a set (`annotator_report`):

- **progress**: pairs done (answered + skipped) of their queue (done + what is still open to them);
- **seconds per pair**: the median time on screen of their answers, bootstrap interval over
  their answers;
- **gold accuracy**, per gold question: correct / n, Wilson interval (each gold pair a trial);
- **agreement with the majority**, per question: over their answers on pairs others answered too,
  the share equal to the others' majority (leave-one-out: their own answer never counts towards
  it; pairs where the others tie are left out), bootstrap interval resampling queries;
- **κ with co-annotators**, per question: Cohen's κ over every (their answer, a co-annotator's
  answer) on the pairs they share, bootstrap interval resampling queries;
- **drift**: their answers in the order given, cut into up to `DRIFT_BLOCKS` blocks of at least
  `MIN_BLOCK` answers; per block the campaign's progress at its middle (share of the set's
  answers given by then), agreement with the majority, gold accuracy and seconds per pair
  (`drift_figure` plots them).

**Pausing** (`set_paused`): an annotator an organiser pauses gets no pair and can save none
(`db.queue.Paused`); their claims and answers no longer hold a pair's overlap, so their pairs
return to the pool for others; the report leaves their answers out of the rates (and says how
many); resuming undoes all of it (their answers were never deleted).

    python -m db.organiser --db ann.sqlite --set NAME [--json a.json] [--plot drift.png]
    python -m db.organiser --db ann.sqlite pause NAME | resume NAME
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from cir_core.errors import CIRError, InputError
from cir_core.stats import bootstrap_median, percentile_interval, resampled_sums, wilson
from db import queue
from db.agreement import kappa_from_table
from db.labels import top
from db.models import Annotator, utcnow
from db.results import SetData, load_set, short_read

DRIFT_BLOCKS = 8
MIN_BLOCK = 5


def _num(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _ratio_ci(per_query: np.ndarray, n_boot: int, seed: int) -> dict[str, Any]:
    """sum(agree) / sum(n) over queries ((q, 2) counts), with a query-resampled interval."""
    if per_query.size == 0 or per_query[:, 1].sum() == 0:
        return {"value": None, "lo": None, "hi": None, "n": 0}
    boot = resampled_sums(per_query, n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = percentile_interval(boot[:, 0] / boot[:, 1])
    return {"value": _num(per_query[:, 0].sum() / per_query[:, 1].sum()), "lo": _num(lo), "hi": _num(hi),
            "n": int(per_query[:, 1].sum())}


def _kappa_ci(tables: np.ndarray, n_boot: int, seed: int) -> dict[str, Any]:
    """κ of the summed (q, C, C) tables with a query-resampled interval."""
    if tables.size == 0 or tables.sum() == 0:
        return {"value": None, "lo": None, "hi": None, "n": 0}
    q, c, _ = tables.shape
    boot = resampled_sums(tables.reshape(q, c * c), n_boot, seed).reshape(n_boot, c, c)
    lo, hi = percentile_interval(kappa_from_table(boot))
    return {"value": _num(float(kappa_from_table(tables.sum(0)))), "lo": _num(lo), "hi": _num(hi),
            "n": int(tables.sum())}


def _query_of(data: SetData) -> dict[int, int]:
    return {t: key[0] for key, t in data.task_of.items()}


def _others_majority(data: SetData) -> dict[tuple[int, str, str], str | None]:
    """(task, annotator, question) -> the majority of the OTHER annotators' answers (None: tie)."""
    by_task: dict[int, list] = defaultdict(list)
    for j in data.judgments:
        if j.status == "answered":
            by_task[j.task_id].append(j)
    out = {}
    for t, js in by_task.items():
        if len(js) < 2:
            continue
        for j in js:
            for q in data.questions:
                c = Counter(o.value(q.name) for o in js if o is not j and o.value(q.name) is not None)
                best = top(c)
                out[(t, j.annotator, q.name)] = best[0] if len(best) == 1 else None
    return out


def _drift(data: SetData, name: str, maj: dict, first_q: str) -> list[dict[str, Any]]:
    """Per block of `name`'s answers in time order: campaign progress, agreement, gold, seconds."""
    answered = [j for j in data.judgments if j.status == "answered"]
    order = sorted(range(len(answered)), key=lambda i: (str(answered[i].created_at), i))
    progress_at = {id(answered[i]): (r + 0.5) / len(order) for r, i in enumerate(order)}
    mine = sorted((j for j in answered if j.annotator == name), key=lambda j: progress_at[id(j)])
    if len(mine) < MIN_BLOCK:
        return []
    blocks = np.array_split(np.arange(len(mine)), min(DRIFT_BLOCKS, len(mine) // MIN_BLOCK))
    gold_q = [i for i, q in enumerate(("identity", "edit")) if q == first_q] or [0]
    out = []
    for b in blocks:
        js = [mine[i] for i in b]
        agree = [j.value(first_q) == maj[(j.task_id, name, first_q)] for j in js
                 if maj.get((j.task_id, name, first_q)) is not None]
        golds = [j.value(first_q) == data.gold[j.task_id][gold_q[0]] for j in js
                 if j.task_id in data.gold and data.gold[j.task_id][gold_q[0]] is not None]
        out.append({"progress": float(np.median([progress_at[id(j)] for j in js])), "answers": len(js),
                    "agreement": _num(float(np.mean(agree))) if agree else None, "agreement_n": len(agree),
                    "gold": _num(float(np.mean(golds))) if golds else None, "gold_n": len(golds),
                    "seconds": float(np.median([j.time_ms / 1000 for j in js]))})
    return out


def annotator_rows(session: Session, data: SetData, n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """The module docstring's table, one dict per annotator of the set (paused ones included)."""
    qs = queue.query_set_by_name(session, data.name)
    query_of = _query_of(data)
    qindex = {q: i for i, q in enumerate(sorted(set(query_of.values())))}
    maj = _others_majority(data)
    by_ann: dict[str, list] = defaultdict(list)
    for j in data.judgments:
        by_ann[j.annotator].append(j)
    by_task: dict[int, list] = defaultdict(list)
    for j in data.judgments:
        if j.status == "answered":
            by_task[j.task_id].append(j)
    names = sorted(set(by_ann) | set(data.paused))
    paused = dict(session.execute(select(Annotator.name, Annotator.paused_at).where(Annotator.name.in_(names))).all())
    first_q = data.questions[0].name
    rows = []
    for name in names:
        js = by_ann.get(name, [])
        answered = [j for j in js if j.status == "answered"]
        ann = queue.find_annotator(session, name)
        mine = queue.own_queue(session, ann, qs)
        prog = mine.progress([] if paused.get(name) else queue.open_tasks(session, ann, qs, mine))
        row: dict[str, Any] = {
            "annotator": name, "paused": paused.get(name) is not None,
            "progress": {"done": prog.done, "total": prog.total, "answered": len(answered),
                         "skipped": len(js) - len(answered)},
            "seconds": {k: _num(v) if isinstance(v, float) else v for k, v in
                        bootstrap_median(np.array([j.time_ms / 1000 for j in answered], float), n_boot,
                                         seed).as_dict().items()},
            "gold": {}, "agreement": {}, "kappa": {}}
        for i, attr in enumerate(("identity", "edit")):
            golds = [(j.value(attr) == data.gold[j.task_id][i]) for j in answered
                     if j.task_id in data.gold and data.gold[j.task_id][i] is not None]
            if golds:
                lo, hi = wilson(sum(golds), len(golds))
                row["gold"][attr] = {"correct": sum(golds), "n": len(golds), "value": sum(golds) / len(golds),
                                     "lo": lo, "hi": hi}
        for q in data.questions:
            agree = np.zeros((len(qindex), 2))
            cat = {v: k for k, v in enumerate(q.values)}
            tables = np.zeros((len(qindex), len(cat), len(cat)))
            for j in answered:
                m = maj.get((j.task_id, name, q.name))
                qi = qindex[query_of[j.task_id]]
                if m is not None and j.value(q.name) is not None:
                    agree[qi] += (j.value(q.name) == m, 1)
                for o in by_task[j.task_id]:
                    if o is not j and j.value(q.name) in cat and o.value(q.name) in cat:
                        tables[qi, cat[j.value(q.name)], cat[o.value(q.name)]] += 1
            row["agreement"][q.name] = _ratio_ci(agree, n_boot, seed)
            row["kappa"][q.name] = _kappa_ci(tables, n_boot, seed)
        row["drift"] = _drift(data, name, maj, first_q)
        rows.append(row)
    return rows


def annotator_report(session: Session, set_name: str, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """{"query_set", "questions", "annotators": annotator_rows(...)} for one set (a read; paused
    annotators' answers included, marked)."""
    with short_read(session):
        data = load_set(session, set_name, include_paused=True)
        rows = annotator_rows(session, data, n_boot, seed)
    return {"query_set": data.name, "questions": [q.name for q in data.questions], "n_boot": n_boot,
            "annotators": rows}


def set_paused(session: Session, name: str, paused: bool) -> bool:
    """Pause or resume annotator `name` (flushes; the caller commits). InputError when unknown."""
    ann = session.scalars(select(Annotator).where(Annotator.name == name)).one_or_none()
    if ann is None:
        raise InputError(f"no annotator named {name!r}")
    queue.lock_annotator(session, ann)
    ann.paused_at = (ann.paused_at or utcnow()) if paused else None
    session.flush()
    return ann.paused_at is not None


def _ci(c: dict[str, Any]) -> str:
    v = c.get("value", c.get("mean"))
    if v is None:
        return "n/a"
    return f"{v:.2f} [{c['lo']:.2f}, {c['hi']:.2f}]"


def format_annotators(report: dict[str, Any]) -> str:
    """The table for the terminal (db.report prints it too)."""
    qs = report["questions"]
    lines = [f"-- annotators of {report['query_set']}: progress, median seconds per pair, gold accuracy "
             "(Wilson), agreement with the others' majority and κ with co-annotators (95% CI over queries)",
             f"{'annotator':24s} {'done':>11s}  {'seconds':22s} " + " ".join(
                 f"{'gold ' + a:22s}" for a in ("identity", "edit")) + " "
             + " ".join(f"{'agree ' + q:22s} {'kappa ' + q:22s}" for q in qs)]
    for r in report["annotators"]:
        p = r["progress"]
        cells = [_ci(r["seconds"])] + [_ci(r["gold"][a]) if a in r["gold"] else "n/a" for a in ("identity", "edit")]
        cells += [x for q in qs for x in (_ci(r["agreement"][q]), _ci(r["kappa"][q]))]
        name = r["annotator"] + (" (paused)" if r["paused"] else "")
        lines.append(f"{name:24s} {p['done']:>5d}/{p['total']:<5d}  " + " ".join(f"{c:22s}" for c in cells))
    return "\n".join(lines)


def drift_figure(report: dict[str, Any]) -> Any:
    """Agreement with the majority, gold accuracy and seconds per pair against the campaign's
    progress, one line per annotator (matplotlib Figure)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, 3)
    for r in report["annotators"]:
        d = r["drift"]
        if not d:
            continue
        x = [b["progress"] for b in d]
        label = r["annotator"] + (" (paused)" if r["paused"] else "")
        for ax, key in zip(axes, ("agreement", "gold", "seconds")):
            pts = [(xi, b[key]) for xi, b in zip(x, d) if b[key] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, label=label)
    q = report["questions"][0]
    for ax, title in zip(axes, (f"agreement with the others' majority ({q})", f"gold accuracy ({q})",
                                "median seconds per pair")):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("campaign progress (share of the set's answers given)", fontsize=8)
        ax.set_xlim(0, 1)
    axes[0].set_ylim(0, 1.02)
    axes[1].set_ylim(0, 1.02)
    axes[2].set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=7)
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m db.organiser", description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="the annotation DB: a SQLite file or a SQLAlchemy URL")
    ap.add_argument("--set", dest="query_set", help="the query set (the table and drift)")
    ap.add_argument("--json", type=Path, help="write the table (with drift) as JSON here")
    ap.add_argument("--plot", type=Path, help="the drift figure (PNG) here")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("action", nargs="?", choices=("table", "pause", "resume"), default="table")
    ap.add_argument("name", nargs="?", help="the annotator to pause or resume")
    a = ap.parse_args(argv)
    if "://" not in a.db and not Path(a.db).is_file():
        ap.error(f"no such database file: {a.db}")
    from db.sqlite import open_db, session_factory

    engine = open_db(a.db)
    try:
        with session_factory(engine)() as s:
            if a.action in ("pause", "resume"):
                if not a.name:
                    ap.error(f"{a.action} needs the annotator's name")
                now = set_paused(s, a.name, a.action == "pause")
                s.commit()
                print(f"{a.name}: {'paused' if now else 'active'}")
                return 0
            if not a.query_set:
                ap.error("--set is needed for the table")
            report = annotator_report(s, a.query_set, n_boot=a.bootstrap)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    print(format_annotators(report))
    if a.json:
        from cir_core.report_header import write_report

        write_report(a.json, report, allow_nan=False, benchmark=f"annotators of {a.query_set}")
    if a.plot:
        drift_figure(report).savefig(a.plot, dpi=120)
        print(f"plot: {a.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
