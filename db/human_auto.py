"""Human vs automatic identity: how far identity@k from cast labels can stand in for people.

Pooling stores every pooled item's automatic identity label (MovieNet: is the query's credited
cast member among the frame's cast ids; the world: its truth) in the query's meta, never shown.
Per method × scoring and depth d (1 and k), on the queries whose top d is judged (the human
rate's queries) and labelled:

- `human`: the human identity rate (`db.results`: per item the mean over annotators, yes = 1;
  per query the mean over ranks 1..d);
- `auto_rate`: the same aggregation of the automatic label — the human rate if people agreed
  with the cast labels;
- `auto_identity`: identity@d as `cir_core.eval` computes it, the share of queries with an
  automatically same-character item among the top d;
- `human_minus_auto`: human − auto_rate on the same queries, paired bootstrap.

Agreement, per judged task: the majority human label (the most frequent answer; ties and a
`cant_tell` majority are left out and counted) against the automatic label, as the agreement rate
and Cohen's κ (two raters: the label and the majority), over every task and per method at k.
Intervals resample queries (a query's tasks together), percentile.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from cir_core.stats import bootstrap_ci, paired_bootstrap, percentile_interval, resampled_sums
from db.results import SetData, per_query_values


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: an undefined mean or bound (no queries) becomes None."""
    return {k: _num(v) if isinstance(v, float) else v for k, v in d.items()}


def majority(data: SetData) -> tuple[dict[int, str], Counter]:
    """task id -> the majority human identity ("yes"/"no"), and why other judged tasks have none."""
    votes: dict[int, Counter] = defaultdict(Counter)
    for j in data.judgments:
        if j.status == "answered" and j.identity:
            votes[j.task_id][j.identity] += 1
    out, left = {}, Counter()
    for t, c in votes.items():
        (top, n), *rest = c.most_common()
        if rest and rest[0][1] == n:
            left["tie"] += 1
        elif top == "cant_tell":
            left["cant_tell"] += 1
        else:
            out[t] = top
    return out, left


def _kappa(cells: np.ndarray) -> np.ndarray:
    """Cohen's κ from (…, 4) counts [auto yes & human yes, yes & no, no & yes, no & no]."""
    yy, yn, ny, nn = np.moveaxis(np.asarray(cells, dtype=np.float64), -1, 0)
    n = yy + yn + ny + nn
    with np.errstate(invalid="ignore", divide="ignore"):
        po = (yy + nn) / n
        pe = ((yy + yn) * (yy + ny) + (ny + nn) * (yn + nn)) / n ** 2
        return np.where(pe < 1, (po - pe) / (1 - pe), np.nan)


def agreement(data: SetData, tasks_by_query: dict[int, list[int]], human: dict[int, str],
              n_boot: int, seed: int) -> dict[str, Any]:
    """Agreement rate and κ of the automatic label with the human majority over these tasks."""
    cells = []
    for qid in sorted(tasks_by_query):
        c = np.zeros(4)
        for t in tasks_by_query[qid]:
            a, h = data.auto_identity.get(t), human.get(t)
            if a is not None and h is not None:
                c[(a == "no") * 2 + (h == "no")] += 1
        if c.sum():
            cells.append(c)
    if not cells:
        return {"n_tasks": 0, "n_queries": 0, "rate": None, "rate_lo": None, "rate_hi": None,
                "kappa": None, "kappa_lo": None, "kappa_hi": None, "table": [0, 0, 0, 0]}
    per_q = np.stack(cells)
    total = per_q.sum(0)
    boot = resampled_sums(per_q, n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = (boot[:, 0] + boot[:, 3]) / boot.sum(1)
    r_lo, r_hi = percentile_interval(rates)
    k_lo, k_hi = percentile_interval(_kappa(boot))
    return {"n_tasks": int(total.sum()), "n_queries": len(cells),
            "rate": _num((total[0] + total[3]) / total.sum()), "rate_lo": _num(r_lo), "rate_hi": _num(r_hi),
            "kappa": _num(float(_kappa(total))), "kappa_lo": _num(k_lo), "kappa_hi": _num(k_hi),
            "table": [int(v) for v in total]}


def _top_tasks(data: SetData, combo: tuple[str, str], qids: list[int], depth: int) -> dict[int, list[int]]:
    ranking = data.rankings.get(combo, {})
    return {q: [data.task_of[(q, ranking[q][r])] for r in range(1, depth + 1)] for q in qids}


def human_vs_auto(data: SetData, scores: dict[int, dict[str, float]], k: int, n_boot: int = 2000,
                  seed: int = 0, ci: str = "percentile") -> dict[str, Any] | None:
    """The module docstring's table as a JSON-ready dict; None when pooling stored no labels."""
    if not data.auto_identity:
        return None
    human, left = majority(data)
    rows = []
    for combo in sorted(data.rankings):
        entry: dict[str, Any] = {"method": combo[0], "scoring": combo[1]}
        for name, depth in (("at_1", 1), ("at_k", k)):
            covered, values = per_query_values(data, scores, combo, depth)
            tops = _top_tasks(data, combo, covered, depth)
            keep = [i for i, q in enumerate(covered) if all(t in data.auto_identity for t in tops[q])]
            auto = np.array([[data.auto_identity[t] == "yes" for t in tops[covered[i]]] for i in keep], float)
            h = values["identity"][keep]
            a_rate = auto.mean(1) if len(keep) else np.zeros(0)
            a_any = auto.max(1) if len(keep) else np.zeros(0)
            entry[name] = {"queries": len(keep),
                           "human": _clean(bootstrap_ci(h, n_boot, seed, method=ci).as_dict()),
                           "auto_rate": _clean(bootstrap_ci(a_rate, n_boot, seed, method=ci).as_dict()),
                           "auto_identity": _clean(bootstrap_ci(a_any, n_boot, seed, method=ci).as_dict()),
                           "human_minus_auto": _clean(paired_bootstrap(h, a_rate, n_boot, seed, method=ci).as_dict())}
            if name == "at_k":
                entry["agreement_at_k"] = agreement(data, {covered[i]: tops[covered[i]] for i in keep},
                                                    human, n_boot, seed)
        rows.append(entry)
    by_query: dict[int, list[int]] = defaultdict(list)
    for (qid, _), t in data.task_of.items():
        by_query[qid].append(t)
    return {"methods": rows, "agreement": agreement(data, by_query, human, n_boot, seed),
            "no_majority": dict(left), "labelled_tasks": len(data.auto_identity)}


def _ci(c: dict) -> str:
    m = c.get("mean", c.get("diff"))
    return "   n/a" if m is None else f"{m:.3f} [{c['lo']:.3f},{c['hi']:.3f}]"


def format_human_auto(r: dict[str, Any] | None, k: int) -> list[str]:
    """Terminal lines for `human_vs_auto`'s dict (none when there are no automatic labels)."""
    if not r:
        return []
    lines = ["-- human vs automatic identity (automatic: cast labels / truth); mean [95% CI] over the queries shown",
             f"{'method/scoring':26s} {'q@1':>4s} {'human @1':20s} {'auto @1':20s} {'q@k':>4s} "
             f"{'human @' + str(k):20s} {'auto rate @' + str(k):20s} {'identity@' + str(k):20s} "
             f"{'human-auto @' + str(k):22s} {'agree @' + str(k):20s} kappa @{k}"]
    for m in r["methods"]:
        a1, ak, ag = m["at_1"], m["at_k"], m["agreement_at_k"]
        lines.append(f"{m['method'] + '/' + m['scoring']:26s} {a1['queries']:>4d} {_ci(a1['human']):20s} "
                     f"{_ci(a1['auto_rate']):20s} {ak['queries']:>4d} {_ci(ak['human']):20s} "
                     f"{_ci(ak['auto_rate']):20s} {_ci(ak['auto_identity']):20s} "
                     f"{_ci(ak['human_minus_auto']):22s} {_agree(ag)}")
    g = r["agreement"]
    lines.append(f"all judged tasks: {_agree(g)}  (n={g['n_tasks']} tasks over {g['n_queries']} queries; "
                 f"auto/human yy, yn, ny, nn = {g['table']}; no majority: {r['no_majority'] or 'none'})")
    return lines


def _agree(g: dict) -> str:
    if g["rate"] is None:
        return "n/a"
    kappa = "n/a" if g["kappa"] is None else f"{g['kappa']:.3f} [{g['kappa_lo']:.3f},{g['kappa_hi']:.3f}]"
    return f"{g['rate']:.3f} [{g['rate_lo']:.3f},{g['rate_hi']:.3f}]  {kappa}"
