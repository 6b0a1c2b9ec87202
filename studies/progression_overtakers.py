"""Who overtakes the final ground truth when a sentence is added (films, issue 25)?

    python -m studies.progression_overtakers [--split test|val] [--n-queries N] [--n-films N]
        [--methods pace,sum] [--checkpoint pace=DIR] [--json out.json]

For each k -> k+1 step of the prefix protocol (cosine, reference removed, the best-ranked ground
truth, exactly as the benchmark ranks it: the step counts are checked against
`progression_failures`), the keyframes that rank above the final ground truth after k + 1
sentences but did not after k are the step's *newcomers*. Each is one of:

- `prefix answer`: the query's character in exactly the state its first k + 1 edits describe
  (the reference's frame with those edits applied): a right answer to the sentences read;
- `character`: the query's character in another state;
- `no character`: a keyframe without the query's character (another actor or only extras).

A step that worsens because of prefix answers worsens for doing what it was told; one that
worsens because of keyframes without the character has lost identity. Reported per method over
the worsened steps (newcomers by kind, and the share of worsened steps whose newcomers include a
prefix answer), beside how many prefix answers the gallery holds per step.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.report_header import write_report

KINDS = ("prefix answer", "character", "no character")


def prefix_states(q: Any) -> list[Any]:
    """The character's key after edits 1..k, k = 1..n, applied to the reference's frame."""
    from cir_core.world.films.language import apply_film_edit

    frame, out = q.reference.state, []
    for e in q.edits:
        frame = apply_film_edit(frame, q.character, e)
        out.append(frame.key_for(q.character))
    return out


def newcomer_kinds(above_before: np.ndarray, above_after: np.ndarray, keys: list[dict], who: int,
                   state: Any) -> dict[str, int]:
    """Count the rows above the ground truth after the step and not before, by kind; `keys[row]`
    is {actor: key} of that keyframe."""
    out = dict.fromkeys(KINDS, 0)
    for row in np.setdiff1d(above_after, above_before):
        k = keys[int(row)].get(who)
        out["prefix answer" if k is not None and k == state else "character" if k is not None else "no character"] += 1
    return out


def rows_above(scores: np.ndarray, gt: set[int], rank: int) -> np.ndarray:
    """The rows ranked before the best-ranked ground truth in one row of scores (higher, or tied
    and lower: the benchmark's tie rule), checked against its `rank`."""
    cols = np.fromiter(gt, np.int64)
    best = cols[np.lexsort((cols, -scores[cols]))[0]]
    a = np.flatnonzero((scores > scores[best]) | ((scores == scores[best]) & (np.arange(len(scores)) < best)))
    if len(a) != rank:
        raise AssertionError(f"{len(a)} rows above the ground truth, but its rank is {rank}")
    return a


def method_overtakers(bench: Any, method: Any, data: Any) -> dict[str, Any]:
    """The newcomers of every worsened and every held step of `method` on the film `bench`."""
    from cir_core.benchmarks.common import refs_at
    from cir_core.metrics import set_ranks
    from cir_core.search.scoring import Queries, ScoreOpts, score_matrix

    films, t = bench.films, bench.truth
    g, norms = data.emb["gallery"], data.norms.get("gallery")
    keys = [it.keyframe.state.keys() for it in films.items]
    count = Counter(pair for kk in keys for pair in kk.items())  # (actor, key): keyframes in that state
    count_actor = Counter(who for kk in keys for who in kk)  # actor: keyframes showing them
    opts = ScoreOpts("cosine").for_method(method)
    sides = ("worsened", "worsened from the top 100", "held")
    tally = {s: {"steps": 0, **dict.fromkeys(KINDS, 0), "with prefix answer": 0} for s in sides}
    answers, base = [], []
    for i in bench.progression_rows():
        q, r, gt = films.queries[i], int(t["ref"][i]), t["gt"][i]
        states = prefix_states(q)
        ref = refs_at(g, norms, slice(r, r + 1))
        qs = np.stack(method.prefix_queries(ref, list(q.sentences)))
        q0 = method.compose_empty(ref)
        sc = score_matrix(Queries(qs, np.repeat(q0, len(qs), 0), np.repeat(g[r][None], len(qs), 0)), g, opts)
        sc[:, r] = -np.inf  # the reference is removed from every ranking
        ranks = set_ranks(sc, [gt] * len(qs), np.full(len(qs), r))
        above = [rows_above(sc[j], gt, int(ranks[j])) for j in range(len(qs))]
        base.append(count_actor[q.character] / len(g))
        for k in range(1, len(qs)):
            kinds = newcomer_kinds(above[k - 1], above[k], keys, q.character, states[k])
            worse = ranks[k] > ranks[k - 1]
            for name in [s for s, on in zip(sides, (worse, worse and ranks[k - 1] < 100, not worse)) if on]:
                side = tally[name]
                side["steps"] += 1
                side["with prefix answer"] += kinds["prefix answer"] > 0
                for kind, n in kinds.items():
                    side[kind] += n
            # the gallery's prefix answers, the final ground truth's keyframes not counted
            answers.append(count.get((q.character, states[k]), 0) - (len(gt) if states[k] == q.target_key else 0))
    for side in tally.values():
        total = sum(side[k] for k in KINDS)
        side["newcomers"] = total
        side["shares"] = {k: round(side[k] / total, 4) if total else None for k in KINDS}
    return {**tally, "gallery_share_with_the_character_median": round(float(np.median(base)), 4),
            "prefix_answers_per_step_median": float(np.median(answers)),
            "steps_with_no_prefix_answer": round(float(np.mean(np.array(answers) == 0)), 4)}


def main(argv: list[str] | None = None) -> int:
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method
    from cir_core.paths import DEFAULT_BACKBONE

    from .cli import checkpoint_arg, checkpoint_args

    ap = argparse.ArgumentParser(prog="python -m studies.progression_overtakers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="test", choices=("test", "val"))
    ap.add_argument("--n-queries", type=int, default=None, help="default: the split's (test 1000, val 500)")
    ap.add_argument("--n-films", type=int, default=None, help="default 104 (test), 24 (val)")
    ap.add_argument("--methods", default="pace,sum")
    ap.add_argument("--checkpoint", action="append", default=[], metavar="METHOD=DIR")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    names = [m.strip() for m in a.methods.split(",") if m.strip()]
    folders = checkpoint_args(ap, [checkpoint_arg(ap, c) for c in a.checkpoint], names, False)
    bb = load_backbone(DEFAULT_BACKBONE)
    bench = load_benchmark("films", split=a.split, n_queries=a.n_queries, n_films=a.n_films,
                           image_size=bb.image_size, progression=True)
    data = embed_benchmark(bench, bb)
    results = {}
    for name in names:
        r = results[name] = method_overtakers(bench, create_method(name, bb, folders.get(name)), data)
        for side in ("worsened", "worsened from the top 100", "held"):
            s = r[side]
            share = ", ".join(f"{k} {v}" for k, v in s["shares"].items())
            print(f"{name}/cosine {side}: {s['steps']} steps, {s['newcomers']} newcomers ({share}); "
                  f"steps with a prefix answer among them {s['with prefix answer']}")
        print(f"{name}: keyframes showing the query's character, median share of the gallery "
              f"{r['gallery_share_with_the_character_median']}; prefix answers in the gallery per step, median "
              f"{r['prefix_answers_per_step_median']}; steps with none {r['steps_with_no_prefix_answer']}")
    if a.json:
        write_report(a.json, {"benchmark": "films", "split": a.split, "n_films": a.n_films,
                              "n_queries": len(bench.world.queries), "scoring": "cosine", "backbone": bb.id,
                              "checkpoints": {k: v or "shipped" for k, v in folders.items()},
                              "methods": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
