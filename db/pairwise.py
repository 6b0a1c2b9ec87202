"""The report of a pairwise set (db.pooling --pairwise): win rates per pair of methods and a
Bradley–Terry ranking, with intervals resampling queries.

For methods X and Y (each a method x scoring) and a query, their results at rank r <= k form one
task, "A or B?" (the side of each drawn per task at pooling). Per judgment: X wins when the
annotator chose X's side, Y when they chose Y's; *both* and *neither* are ties. Per pair of
methods, over its tasks:

- `raw`: shares of X wins, Y wins, both, neither over the answers, and X's **win rate**
  (X wins + ½ ties) / answers;
- `adjudicated`: the same from each task's final label (a reviewer's decision, else the majority;
  a tie of answers counts ½ to each), one per task;
- `identical`: tasks never asked because both methods returned the same item there.

Intervals: percentile bootstrap resampling queries (a query's tasks together, `resampled_sums`).
**Bradley–Terry** (any number of methods): strengths p_i with P(i beats j) = p_i / (p_i + p_j),
fitted by Hunter's (2004) MM iterations on the win counts (ties split ½ / ½, and 0.5 pseudo-wins
each way on every compared pair so a method that never wins keeps a finite strength), reported
as log-strengths centred at 0 with bootstrap intervals (the same query resamples), ranked.
**Position bias**: the share of A (left) among the answers that chose a side; ½ when the sides
do not matter.
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import numpy as np

from cir_core.stats import percentile_interval, resampled_sums
from db.labels import Final, final_labels
from db.results import SetData

PSEUDO = 0.5
OUTCOMES = ("x", "y", "both", "neither")


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _combos(data: SetData) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    pairs = data.meta.get("pairs")
    if pairs:
        return [(tuple(a.split("/", 1)), tuple(b.split("/", 1))) for a, b in pairs]
    return list(itertools.combinations(sorted(data.rankings), 2))


def tasks_of_pair(data: SetData, x: tuple[str, str], y: tuple[str, str], k: int
                  ) -> tuple[list[tuple[int, int, str]], int]:
    """[(query, task, X's side 'a'/'b')] for the pair's asked tasks, and how many were identical."""
    out, identical = [], 0
    rx, ry = data.rankings.get(x, {}), data.rankings.get(y, {})
    for q in data.query_ids:
        for r in range(1, k + 1):
            a, b = rx.get(q, {}).get(r), ry.get(q, {}).get(r)
            if a is None or b is None:
                continue
            if a == b:
                identical += 1
                continue
            if (q, a, b) in data.task_of:
                out.append((q, data.task_of[(q, a, b)], "a"))
            elif (q, b, a) in data.task_of:
                out.append((q, data.task_of[(q, b, a)], "b"))
    return out, identical


def _outcome(pref: str | None, side: str) -> int | None:
    """Index in OUTCOMES of an answer for X on side `side`."""
    if pref in ("a", "b"):
        return 0 if pref == side else 1
    return {"both": 2, "neither": 3}.get(pref or "")


def _shares(per_query: np.ndarray, n_boot: int, seed: int) -> dict[str, Any]:
    """Win rate and outcome shares from (queries, 4) counts, with query-resampled intervals."""
    total = per_query.sum(0)
    n = float(total.sum())
    if n == 0:
        return {"n": 0, "queries": 0, "win_rate": {"mean": None, "lo": None, "hi": None}}
    boot = resampled_sums(per_query, n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        nb = boot.sum(1)
        win = (boot[:, 0] + 0.5 * (boot[:, 2] + boot[:, 3])) / nb
    lo, hi = percentile_interval(win)
    out: dict[str, Any] = {"n": n, "queries": int((per_query.sum(1) > 0).sum()),
                           "win_rate": {"mean": _num((total[0] + 0.5 * (total[2] + total[3])) / n),
                                        "lo": _num(lo), "hi": _num(hi)}}
    for i, name in enumerate(OUTCOMES):
        with np.errstate(invalid="ignore", divide="ignore"):
            l, h = percentile_interval(boot[:, i] / nb)
        out[name] = {"mean": _num(total[i] / n), "lo": _num(l), "hi": _num(h)}
    return out


def bradley_terry(wins: np.ndarray, iters: int = 500, tol: float = 1e-10) -> np.ndarray:
    """Log-strengths (centred) from a (C, C) matrix of wins of row over column (MM, Hunter 2004;
    `PSEUDO` wins added each way on every pair that met)."""
    w = np.asarray(wins, dtype=np.float64)
    met = (w + w.T) > 0
    w = w + PSEUDO * met
    n = w + w.T
    p = np.ones(w.shape[0])
    for _ in range(iters):
        denom = (n / (p[:, None] + p[None, :])).sum(1)
        new = np.where(denom > 0, w.sum(1) / np.where(denom > 0, denom, 1), p)
        new = new / np.exp(np.mean(np.log(new)))
        if np.max(np.abs(new - p)) < tol:
            p = new
            break
        p = new
    return np.log(p) - np.mean(np.log(p))


def pairwise_report(data: SetData, k: int | None = None, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The module docstring's report as a JSON-ready dict."""
    k = data.pool_k if k is None else k
    finals: dict[int, Final] = final_labels(data)
    answers: dict[int, list[str]] = defaultdict(list)
    for j in data.judgments:
        if j.status == "answered" and j.value("preference"):
            answers[j.task_id].append(j.value("preference"))
    combos = sorted({c for pair in _combos(data) for c in pair})
    index = {c: i for i, c in enumerate(combos)}
    qindex = {q: i for i, q in enumerate(data.query_ids)}
    wins = np.zeros((len(qindex), len(combos), len(combos)))
    pairs = []
    for x, y in _combos(data):
        tasks, identical = tasks_of_pair(data, x, y, k)
        raw = np.zeros((len(qindex), 4))
        final = np.zeros((len(qindex), 4))
        for q, t, side in tasks:
            qi = qindex[q]
            for pref in answers.get(t, []):
                o = _outcome(pref, side)
                raw[qi, o] += 1
                if o == 0:
                    wins[qi, index[x], index[y]] += 1
                elif o == 1:
                    wins[qi, index[y], index[x]] += 1
                else:
                    wins[qi, index[x], index[y]] += 0.5
                    wins[qi, index[y], index[x]] += 0.5
            f = finals.get(t)
            if f is None or f.source == "unjudged":
                continue
            label = f.labels.get("preference")
            options = [label] if label is not None else list(f.tied.get("preference", ()))
            for opt in options:
                final[qi, _outcome(opt, side)] += 1 / len(options)
        pairs.append({"x": "/".join(x), "y": "/".join(y), "tasks": len(tasks), "identical": identical,
                      "raw": _shares(raw, n_boot, seed), "adjudicated": _shares(final, n_boot, seed)})
    out: dict[str, Any] = {"pairs": pairs, "methods": ["/".join(c) for c in combos]}
    if len(combos) >= 2 and wins.sum() > 0:
        strength = bradley_terry(wins.sum(0))
        c = len(combos)
        boot = resampled_sums(wins.reshape(len(qindex), c * c), min(n_boot, 500), seed).reshape(-1, c, c)
        samples = np.stack([bradley_terry(b) for b in boot])
        order = np.argsort(-strength)
        out["bradley_terry"] = [
            {"rank": r + 1, "method": "/".join(combos[i]), "log_strength": _num(strength[i]),
             "lo": _num(percentile_interval(samples[:, i])[0]), "hi": _num(percentile_interval(samples[:, i])[1])}
            for r, i in enumerate(order)]
    sided = np.zeros((len(qindex), 2))
    for key, t in data.task_of.items():
        for pref in answers.get(t, []):
            if pref in ("a", "b"):
                sided[qindex[key[0]]] += (pref == "a", 1)
    if sided[:, 1].sum():
        boot = resampled_sums(sided, n_boot, seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            lo, hi = percentile_interval(boot[:, 0] / boot[:, 1])
        out["position_bias"] = {"share_a": _num(sided[:, 0].sum() / sided[:, 1].sum()), "lo": _num(lo),
                                "hi": _num(hi), "n": int(sided[:, 1].sum())}
    return out


def _ci(c: dict[str, Any]) -> str:
    return "n/a" if c.get("mean") is None else f"{c['mean']:.3f} [{c['lo']:.3f},{c['hi']:.3f}]"


def format_pairwise(r: dict[str, Any]) -> list[str]:
    """Terminal lines for `pairwise_report`'s dict."""
    lines = ["-- pairwise: X's win rate over Y ((X wins + ½ ties) / answers), raw answers and adjudicated "
             "labels; 95% CI over queries",
             f"{'X':24s} {'Y':24s} {'tasks':>5s} {'ident':>5s}  {'raw win rate':22s} {'adjudicated':22s} "
             f"{'X wins':22s} {'Y wins':22s} {'both':22s} neither"]
    for p in r["pairs"]:
        raw = p["raw"]
        cells = [_ci(raw["win_rate"]), _ci(p["adjudicated"]["win_rate"])] + \
            [_ci(raw.get(o, {})) for o in OUTCOMES]
        lines.append(f"{p['x']:24s} {p['y']:24s} {p['tasks']:>5d} {p['identical']:>5d}  " +
                     " ".join(f"{c:22s}" for c in cells))
    if r.get("bradley_terry"):
        lines.append("-- Bradley-Terry ranking (log-strength, 95% CI over queries)")
        lines += [f"{b['rank']:>2d}. {b['method']:28s} {b['log_strength']:+.3f} [{b['lo']:+.3f},{b['hi']:+.3f}]"
                  for b in r["bradley_terry"]]
    if r.get("position_bias"):
        pb = r["position_bias"]
        lines.append(f"position bias: A (left) chosen in {pb['share_a']:.3f} [{pb['lo']:.3f},{pb['hi']:.3f}] "
                     f"of {pb['n']} answers that chose a side (0.5: none)")
    return lines
