"""A simulated campaign through the real annotation service, and whether the report recovers it.

Simulated annotators with known identity error rates judge a pooled set through
`AnnotationService` (the app's own open / answer path: queues, overlap, gold to everyone). The
truth they perceive is the automatic identity label pooling stored (cast labels); each flips it
with their error rate; edits are answered yes / partly / no at fixed rates (a MovieNet set has no
edit truth). Then `db.report` runs and the rates it reports are checked against what the
simulation makes true:

- each annotator's gold identity accuracy against 1 − their error rate (Wilson 95 % interval);
- each method × scoring's human identity rate at 1 and at k against its expected value given who
  judged what (the mean over the method's queries of the mean over ranks and judges of
  P(yes) = 1 − e if the label is yes, else e), inside the report's bootstrap interval;
- the automatic label's agreement with the majority human label against its expected value
  (from the judges' error rates; ties are left out as the report leaves them out).

With `--reviewer-error E`, a simulated reviewer then adjudicates every task in review (the
disagreements, and the set's audit share of agreed ones) through the same service: identity from
the truth flipped with rate E, the other questions one of the answers given, at random. Two more
checks: no open tie is left (a tie no reviewer decided), and the reviewer's identity accuracy
against 1 − E (Wilson 95 %); the report then has the raw-majority and adjudicated rates side by side.

    python -m db.simulate --db ann.sqlite --set NAME --error-rates 0.02,0.05,0.1,0.15,0.2,0.3 \\
        [--reviewer-error 0.05] [--seed 0] [--json out.json]

Exit status 1 when fewer than `--min-recovered` (0.8) of the checks hold.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir_core.errors import CIRError, InputError
from cir_core.settings import add_seed_arg
from cir_core.stats import wilson
from db.report import compute_report, format_report
from db.results import load_set, per_query_values
from db.service import AnnotationService

EDIT_ANSWERS = (("yes", 0.4), ("partial", 0.2), ("no", 0.4))


@dataclass(frozen=True)
class Simulated:
    name: str
    error: float  # P(identity answer flipped)


def run_campaign(svc: AnnotationService, set_name: str, annotators: list[Simulated], truth: dict[int, str],
                 seed: int = 0) -> int:
    """Every annotator works through their queue, one answer each in turn; returns the answers."""
    rng = random.Random(f"simulate:{seed}")
    others = [q for q in svc.set_questions(set_name) if q.name not in ("identity", "edit")]
    states = {a.name: svc.open(a.name, set_name) for a in annotators}
    n = 0
    while any(st.task is not None for st in states.values()):
        for a in annotators:
            st = states[a.name]
            if st.task is None:
                continue
            true = truth[st.task.task_id]
            ident = true if rng.random() >= a.error else ("no" if true == "yes" else "yes")
            edit = rng.choices([e for e, _ in EDIT_ANSWERS], [w for _, w in EDIT_ANSWERS])[0]
            extra = {q.name: rng.choice(q.values) for q in others}
            states[a.name] = svc.answer(a.name, set_name, st.task.task_id, ident, edit, answers=extra)
            n += 1
    return n


REVIEWER = "sim-reviewer"


def run_review(svc: AnnotationService, set_name: str, truth: dict[int, str], error: float, seed: int = 0) -> list[bool]:
    """A simulated reviewer decides every task waiting for review (module docstring); returns,
    per decision, whether its identity equals the truth."""
    rng = random.Random(f"review:{seed}")
    correct = []
    for view in svc.review_queue(REVIEWER, set_name):
        true = truth[view.task_id]
        ident = true if rng.random() >= error else ("no" if true == "yes" else "yes")
        answers = {q.name: (ident if q.name == "identity" else rng.choice([a[q.name] for a in view.answers]))
                   for q in svc.set_questions(set_name)}
        svc.adjudicate(REVIEWER, set_name, view.task_id, answers, move_on=False)
        correct.append(ident == true)
    return correct


def _majority_odds(errors: list[float]) -> tuple[float, float]:
    """(P(majority right), P(majority wrong)) of independent judges with these error rates."""
    dist = [1.0]  # P(#right = i)
    for e in errors:
        nxt = [0.0] * (len(dist) + 1)
        for i, p in enumerate(dist):
            nxt[i] += p * e
            nxt[i + 1] += p * (1 - e)
        dist = nxt
    m = len(errors)
    right = sum(p for i, p in enumerate(dist) if 2 * i > m)
    wrong = sum(p for i, p in enumerate(dist) if 2 * i < m)
    return right, wrong


def expected(data: Any, errors: dict[str, float], k: int) -> dict[str, Any]:
    """What the simulation makes true, given who judged what (module docstring)."""
    judges: dict[int, list[float]] = defaultdict(list)
    for j in data.judgments:
        if j.status == "answered":
            judges[j.task_id].append(errors[j.annotator])

    def p_yes(t: int) -> float:
        es = judges[t]
        return sum((1 - e) if data.auto_identity[t] == "yes" else e for e in es) / len(es)

    fake_scores = {t: {"identity": p_yes(t), "identity_cant_tell": 0.0, "edit": 0.0, "edit_strict": 0.0}
                   for t in judges if t in data.auto_identity}
    rates = {}
    for combo in data.rankings:
        for name, depth in (("at_1", 1), ("at_k", k)):
            covered, values = per_query_values(data, fake_scores, combo, depth)
            rates[("/".join(combo), name)] = float(values["identity"].mean()) if covered else float("nan")
    odds = [_majority_odds(judges[t]) for t in judges if t in data.auto_identity]
    agree = sum(r for r, _ in odds) / max(1e-12, sum(r + w for r, w in odds))
    return {"rates": rates, "agreement": agree}


def check(report: dict[str, Any], data: Any, annotators: list[Simulated]) -> dict[str, Any]:
    """Each check: what is true, what the report says, and whether its interval holds the truth."""
    errors = {a.name: a.error for a in annotators}
    want = expected(data, errors, report["k"])
    rows = []
    for g in report["gold"]:
        n, c = g["identity"]["n"], g["identity"]["correct"]
        lo, hi = wilson(c, n)
        true = 1 - errors[g["annotator"]]
        rows.append({"check": f"gold accuracy {g['annotator']}", "true": true, "got": c / n if n else None,
                     "lo": lo, "hi": hi, "ok": bool(n and lo <= true <= hi)})
    ha = report["human_vs_auto"] or {"methods": [], "agreement": {"rate": None}}
    for m in ha["methods"]:
        for depth in ("at_1", "at_k"):
            ci = m[depth]["human"]
            true = want["rates"][(f"{m['method']}/{m['scoring']}", depth)]
            ok = ci["n"] > 0 and ci["lo"] is not None and ci["lo"] <= true <= ci["hi"]
            rows.append({"check": f"human identity {m['method']}/{m['scoring']} {depth}", "true": true,
                         "got": ci["mean"], "lo": ci["lo"], "hi": ci["hi"], "ok": bool(ok)})
    g = ha["agreement"]
    if g["rate"] is not None:
        rows.append({"check": "agreement auto vs human majority", "true": want["agreement"], "got": g["rate"],
                     "lo": g["rate_lo"], "hi": g["rate_hi"], "ok": g["rate_lo"] <= want["agreement"] <= g["rate_hi"]})
    held = sum(r["ok"] for r in rows)
    return {"checks": rows, "held": held, "total": len(rows)}


def format_checks(res: dict[str, Any]) -> str:
    lines = [f"-- simulation recovered: {res['held']}/{res['total']} checks hold (true value inside the 95% interval)",
             f"{'check':52s} {'true':>7s} {'reported':>9s}  interval"]
    for r in res["checks"]:
        got = "n/a" if r["got"] is None else f"{r['got']:.3f}"
        span = "n/a" if r["lo"] is None else f"[{r['lo']:.3f}, {r['hi']:.3f}]"
        lines.append(f"{r['check']:52s} {r['true']:7.3f} {got:>9s}  {span}"
                     f"{'' if r['ok'] else '  MISSED'}")
    return "\n".join(lines)


def simulate(db: str | Path, set_name: str, errors: list[float], seed: int = 0, n_boot: int = 2000,
             reviewer_error: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the campaign on `set_name` in `db` (and, with `reviewer_error`, the review), then the
    report and the checks: (report, checks)."""
    from db.users import Roles

    annotators = [Simulated(f"sim-{i + 1}-e{e:g}", e) for i, e in enumerate(errors)]
    # a simulation: no OS crash to survive (NORMAL); the simulated reviewer has the role
    svc = AnnotationService(db, synchronous="NORMAL", roles=Roles(reviewers=frozenset({REVIEWER})))
    try:
        with svc.ReadSession() as s:
            data = load_set(s, set_name)
        if not data.auto_identity:
            raise InputError(f"set {set_name!r} has no automatic identity labels to simulate from "
                             "(pool it again: pooling stores them)")
        run_campaign(svc, set_name, annotators, data.auto_identity, seed)
        decided = run_review(svc, set_name, data.auto_identity, reviewer_error, seed) \
            if reviewer_error is not None else None
        with svc.ReadSession() as s:
            report = compute_report(s, set_name, n_boot=n_boot, seed=seed)
            data = load_set(s, set_name)
    finally:
        svc.close()
    res = check(report, data, annotators)
    if decided is not None:
        lo, hi = wilson(sum(decided), len(decided))
        res["checks"].append({"check": f"reviewer identity accuracy ({len(decided)} decisions)",
                              "true": 1 - reviewer_error, "got": sum(decided) / len(decided) if decided else None,
                              "lo": lo, "hi": hi, "ok": bool(decided and lo <= 1 - reviewer_error <= hi)})
        ties = report["review"]["open_ties"]
        res["checks"].append({"check": "open ties after review", "true": 0.0, "got": float(ties), "lo": 0.0,
                              "hi": 0.0, "ok": ties == 0})
        res["held"], res["total"] = sum(r["ok"] for r in res["checks"]), len(res["checks"])
    return report, res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m db.simulate", description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--set", required=True, dest="set_name")
    ap.add_argument("--error-rates", default="0.02,0.05,0.1,0.15,0.2,0.3",
                    help="one simulated annotator per rate (identity answers flipped with it)")
    add_seed_arg(ap, what="the simulated annotators")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--min-recovered", type=float, default=0.8, help="share of checks that must hold")
    ap.add_argument("--reviewer-error", type=float, help="then adjudicate every task in review with a "
                    "simulated reviewer erring on identity at this rate")
    ap.add_argument("--json", type=Path, help="write {report, checks} here")
    a = ap.parse_args(argv)
    try:
        errors = [float(x) for x in a.error_rates.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--error-rates should be comma-separated numbers, got {a.error_rates!r}")
    if not errors or not all(0 <= e < 0.5 for e in errors):
        ap.error("every error rate must be in [0, 0.5)")
    try:
        report, res = simulate(a.db, a.set_name, errors, a.seed, a.bootstrap, a.reviewer_error)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_report(report))
    print(format_checks(res))
    if a.json:
        a.json.write_text(json.dumps({"report": report, "checks": res}, indent=1, allow_nan=False, default=str))
    ties_left = a.reviewer_error is not None and report["review"]["open_ties"] > 0
    return 0 if res["held"] >= a.min_recovered * res["total"] and not ties_left else 1


if __name__ == "__main__":
    sys.exit(main())
