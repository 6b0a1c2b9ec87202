"""An evaluation report (`python -m cir_core.eval --json r.json`) as the markdown tables of
docs/RESULTS.md, so that a table there is pasted from a command, never typed.

    python -m cir_core.eval.markdown r.json [--metrics R@1,R@10,identity@1] [--lambdas assets/methods]
                                     [--breakdown chord] [--progression chord]

Values in %, one decimal; `--lambdas` names the checkpoints folder whose `config.json` files give
each method's Chord λ (shown as "chord (λ 0.34)").
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError

PROGRESSION = (("R@10 after sentence 1", "R@10_first_step", True), ("R@10 after all", "R@10_last_step", True),
               ("target rank improved (or held)", None, True), ("steps improved or held", "step_improved_or_held", True),
               ("median rank first → last", None, False))


def read_lambdas(folder: str | Path) -> dict[str, float]:
    """method -> chord_lambda, from every `<method>/config.json` under `folder` that has one."""
    out = {}
    for cfg in sorted(Path(folder).glob("*/config.json")):
        lam = json.loads(cfg.read_text()).get("chord_lambda")
        if isinstance(lam, (int, float)):
            out[cfg.parent.name] = float(lam)
    return out


def _row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def metrics_table(report: dict, metrics: Sequence[str] | None = None, lambdas: dict[str, float] | None = None) -> str:
    """Every method × scoring of `report` with `metrics` (default: all the report has)."""
    rows = [(m, sc, v) for m, by in report["results"].items() for sc, v in by.items()]
    if not rows:
        raise InputError("the report has no results")
    keys = list(metrics or rows[0][2])
    lambdas = lambdas or {}
    out = [_row(["method", "scoring", *keys]), _row(["---"] * (len(keys) + 2))]
    for m, sc, v in rows:
        label = f"chord (λ {lambdas[m]:g})" if sc == "chord" and m in lambdas else sc
        out.append(_row([m, label, *(_pct(v.get(k)) for k in keys)]))
    return "\n".join(out)


def breakdown_table(report: dict, scoring: str = "chord", metric: str = "R@10") -> str:
    """`metric` by kind of query (the report's `breakdown`), one row per method."""
    got = {m: (by.get(scoring) or {}).get("breakdown", {}) for m, by in report.get("extra", {}).items()}
    got = {m: b for m, b in got.items() if b}
    if not got:
        raise InputError(f"the report has no breakdown under {scoring!r}")
    kinds = sorted({k[len(metric) + 1:-1] for b in got.values() for k in b if k.startswith(metric + "[")})
    out = [_row(["method", *kinds]), _row(["---"] * (len(kinds) + 1))]
    out += [_row([m, *(_pct(b.get(f"{metric}[{k}]")) for k in kinds)]) for m, b in got.items()]
    return "\n".join(out)


def progression_table(report: dict, scoring: str = "chord") -> str:
    """The per-sentence progression of every method that has one, per protocol."""
    out = [_row(["method (protocol)", *(h for h, _, _ in PROGRESSION)]), _row(["---"] * (len(PROGRESSION) + 1))]
    for m, by in report.get("extra", {}).items():
        for proto, p in sorted(((by.get(scoring) or {}).get("progression") or {}).items()):
            out.append(_row([f"{m} ({proto})", _pct(p["R@10_first_step"]), _pct(p["R@10_last_step"]),
                             f"{_pct(p['rank_improved'])} % ({_pct(p['rank_improved_or_held'])} %)",
                             f"{_pct(p['step_improved_or_held'])} %",
                             f"{p['median_rank_first']:g} → {p['median_rank_last']:g}"]))
    if len(out) == 2:
        raise InputError(f"the report has no progression under {scoring!r} (evaluate with --progression)")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cir_core.eval.markdown", description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--metrics", help="comma-separated metric names (default: every one in the report)")
    ap.add_argument("--lambdas", help="a checkpoints folder: each method's Chord λ beside 'chord'")
    ap.add_argument("--breakdown", metavar="SCORING", help="also R@10 by kind of query under SCORING")
    ap.add_argument("--progression", metavar="SCORING", help="also the per-sentence progression under SCORING")
    a = ap.parse_args(argv)
    try:
        report = json.loads(a.report.read_text())
        lambdas = read_lambdas(a.lambdas) if a.lambdas else None
        parts = [metrics_table(report, a.metrics.split(",") if a.metrics else None, lambdas)]
        if a.breakdown:
            parts.append(breakdown_table(report, a.breakdown))
        if a.progression:
            parts.append(progression_table(report, a.progression))
    except (OSError, ValueError, KeyError, InputError) as exc:
        print(f"error: {a.report}: {exc}", file=sys.stderr)
        return 2
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
