"""How often the report's 95 % bootstrap intervals over queries contain the true rate, by number of
queries: the percentile interval (the default) against BCa (`cir_core.stats`, method="bca").

    .venv/bin/python bench/bootstrap_coverage.py [--reps 2000 --n-boot 1000 --queries 8 12 20 30 50]

Simulated annotation data: each query has its own rate p_q ~ Beta(a, b) (queries differ in
difficulty), its k = 5 pooled items are judged yes/no with that rate, the query's value is the
mean over its items (as `db.results.per_query_values` computes at k). The true rate is
a / (a + b). Scenarios: a middling rate (Beta(2, 1.5), mean 0.57) and a skewed one near the
ceiling (Beta(6, 1), mean 0.86), the case where the percentile interval is known to under-cover.
A fresh seed per replication; the interval is the one the report computes (its seeded draws).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cir_core.stats import bootstrap_ci  # noqa: E402

SCENARIOS = {"middling rate, Beta(2, 1.5)": (2.0, 1.5), "near the ceiling, Beta(6, 1)": (6.0, 1.0)}


def coverage(n: int, a: float, b: float, reps: int, n_boot: int, k: int = 5, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    truth = a / (a + b)
    hits = {"percentile": 0, "bca": 0}
    for r in range(reps):
        p = rng.beta(a, b, size=n)
        values = rng.binomial(k, p) / k
        for m in hits:
            ci = bootstrap_ci(values, n_boot=n_boot, seed=r, method=m)
            hits[m] += ci.lo <= truth <= ci.hi
    return {m: h / reps for m, h in hits.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--queries", type=int, nargs="+", default=[8, 12, 20, 30, 50])
    a = ap.parse_args(argv)
    se = (0.95 * 0.05 / a.reps) ** 0.5
    print(f"coverage of nominal 95 % intervals, {a.reps} replications each (Monte Carlo s.e. "
          f"{se:.3f}), {a.n_boot} resamples")
    print(f"{'scenario':32s} {'queries':>7s} {'percentile':>10s} {'BCa':>6s}")
    for name, (alpha, beta) in SCENARIOS.items():
        for n in a.queries:
            c = coverage(n, alpha, beta, a.reps, a.n_boot)
            print(f"{name:32s} {n:7d} {c['percentile']:10.3f} {c['bca']:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
