"""When does Chord fix what cosine gets wrong? (PACT, seed 000, Fig. 3b / Fig. 6.)

For every query of the world's test split and every hard distractor in its subset (the edit
applied to another character, the reference re-rendered, a failed modification; on the films,
`--benchmark films`: another keyframe of the reference's shot, the shots around the target, the
edit with another actor, other keyframes of the character) that cosine
ranks above the target, the pair is "wrong under cosine" with a cosine deficit
cos(q, v_d) − cos(q, v_t) > 0. Chord corrects it when it scores the target above that
distractor. The correction rate is reported per deficit quintile (quintile edges over all the
methods' wrong pairs, so the bins are the same for every method), with a query-level bootstrap
95 % interval.

    python -m studies.chord_analysis [--benchmark world|films] [--methods pact,compose-only,dice,pace,sum] [--json c.json] [--plot docs/img/chord_correction.png]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from cir_core.report_header import write_report
from cir_core.stats import rate_by_group


def wrong_pairs(cos_t: np.ndarray, cos_d: np.ndarray, chord_t: np.ndarray, chord_d: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query index, cosine deficit, corrected by Chord) of every (query, distractor) pair that
    cosine ranks wrongly. cos_t (Q,), cos_d (Q, S) (-inf: no distractor), likewise for Chord."""
    wrong = cos_d > cos_t[:, None]
    qi, _ = np.nonzero(wrong)
    deficit = (cos_d - cos_t[:, None])[wrong]
    fixed = (chord_t[:, None] > chord_d)[wrong]
    return qi, deficit, fixed


def correction_by_bin(qi: np.ndarray, deficit: np.ndarray, fixed: np.ndarray, edges: np.ndarray,
                      n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Per deficit bin [edges[b], edges[b+1]): pairs, correction rate and its query-level
    bootstrap 95 % interval (queries resampled with replacement, their pairs along)."""
    bins = np.clip(np.searchsorted(edges, deficit, side="right") - 1, 0, len(edges) - 2)
    rows = rate_by_group(qi, bins, fixed, len(edges) - 1, n_boot, seed)
    return [{"bin": b + 1, "deficit_from": round(float(edges[b]), 4), "deficit_to": round(float(edges[b + 1]), 4),
             "pairs": r["n"], "rate": r["rate"], "ci95": r["ci95"]} for b, r in enumerate(rows)]


def method_pairs(bench, method, data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The wrong-under-cosine pairs of one method on the world benchmark (its own Chord λ): its
    subsets' scores under cosine and Chord from the evaluation loop (`score_method`)."""
    from cir_core.eval.loop import score_method
    from cir_core.search.scoring import ScoreOpts

    t = bench.truth
    results, _ = score_method(bench, method, data, [ScoreOpts("cosine"), ScoreOpts("chord")])
    cos, chord = (r.aux["subset_scores"] for r in results)
    is_t = t["subsets"] == t["target"][:, None]
    off = is_t | (t["subsets"] < 0)  # the target itself, and padding (a film subset may have some)
    pick = lambda s: (s[is_t], np.where(off, -np.inf, s))  # noqa: E731  (target's score, distractors')
    (cos_t, cos_d), (ch_t, ch_d) = pick(cos), pick(chord)
    return wrong_pairs(cos_t, cos_d, ch_t, ch_d)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6), dpi=150)
    ax = fig.add_subplot()
    names = list(results)
    width = 0.8 / max(len(names), 1)
    for j, name in enumerate(names):
        rows = results[name]["bins"]
        x = np.arange(len(rows)) + (j - (len(names) - 1) / 2) * width
        rate = np.array([r["rate"] if r["rate"] is not None else np.nan for r in rows])
        lo = np.array([r["ci95"][0] if r["ci95"] else np.nan for r in rows])
        hi = np.array([r["ci95"][1] if r["ci95"] else np.nan for r in rows])
        ax.bar(x, rate, width, label=f"{name} (λ={results[name]['lambda']:g})")
        ax.errorbar(x, rate, yerr=[rate - lo, hi - rate], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    first = results[names[0]]["bins"]
    ax.set_xticks(range(len(first)), [f"Q{r['bin']}\n{r['deficit_from']:.3f}–{r['deficit_to']:.3f}" for r in first],
                  fontsize=7)
    ax.set_xlabel("cosine deficit of the wrongly ranked pair (quintile)", fontsize=8)
    ax.set_ylabel("share corrected by Chord", fontsize=8)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title("Chord's corrections of cosine's wrong (target, hard distractor) pairs, 95 % CI", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method
    from cir_core.paths import DEFAULT_BACKBONE

    ap = argparse.ArgumentParser(prog="python -m studies.chord_analysis", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default="pact,compose-only,dice,pace,sum")
    ap.add_argument("--benchmark", default="world", choices=("world", "films"),
                    help="the world's test split or the films' (hard distractors: each query's subset)")
    ap.add_argument("--n-queries", type=int, default=1000)
    ap.add_argument("--bins", type=int, default=5)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    a = ap.parse_args(argv)
    bb = load_backbone(DEFAULT_BACKBONE)
    bench = load_benchmark(a.benchmark, split="test", n_queries=a.n_queries, image_size=bb.image_size)
    data = embed_benchmark(bench, bb)
    pairs = {}
    for name in [m.strip() for m in a.methods.split(",") if m.strip()]:
        m = create_method(name, bb)
        pairs[name] = (m.chord_lambda, *method_pairs(bench, m, data))
    all_def = np.concatenate([p[2] for p in pairs.values()])
    edges = np.quantile(all_def, np.linspace(0, 1, a.bins + 1))
    edges[-1] = np.nextafter(edges[-1], np.inf)
    results = {n: {"lambda": lam, "wrong_pairs": int(len(d)), "corrected": round(float(f.mean()), 4) if len(f) else None,
                   "bins": correction_by_bin(q, d, f, edges, a.bootstrap)} for n, (lam, q, d, f) in pairs.items()}
    for n, r in results.items():
        print(f"{n} (λ={r['lambda']:g}): {r['wrong_pairs']} wrong pairs, {r['corrected']} corrected; by quintile: "
              + ", ".join(f"{b['rate']} [{b['ci95'][0]}, {b['ci95'][1]}]" if b["rate"] is not None else "-" for b in r["bins"]))
    if a.json:
        write_report(a.json, {"benchmark": a.benchmark, "split": "test", "n_queries": a.n_queries, "backbone": bb.id,
                              "edges": edges.round(5).tolist(), "methods": results})
    if a.plot:
        plot(results, a.plot)
        print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
