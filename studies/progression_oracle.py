"""The prefix progression's reference point on this backbone (issue 25): what a composer that
produced exactly the image its prefix describes would score.

    python -m studies.progression_oracle [--benchmark films|world] [--split test|val]
        [--n-queries N] [--n-films N] [--methods pace,sum] [--checkpoint pace=DIR] [--json out.json]

For each multi-sentence query the progression counts, the reference with the query's first k
edits applied (to its character, on the films) is drawn as `training.prefix_targets` draws the
intermediate targets PACE trains on: a film frame as the reference keyframe (its film's palette,
place and shot seeds), a world scene with the target's render seed, so only what the sentences
said has changed. Its image embedding *is* the query after k sentences. The ranks go through the
benchmark's own prefix ranking (reference removed, best-ranked ground truth, cosine) and
`studies.progression_failures.breakdown`, beside the methods named, in one process.

What it says: the oracle composes perfectly in the backbone's image space, so a step it fails
is one the backbone's geometry does not order under this metric (the final ground truth moved
down although the query now shows one more of its properties). It is a reference point, not a
bound: a composer may place its query elsewhere than on an image. If the oracle is below the
bar, the bar asks for more than composing the described image gives on this backbone.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cir_core.errors import InputError
from cir_core.report_header import write_report


def oracle_steps(queries: Sequence[Any], rows: Sequence[int], backbone: Any,
                 progress: bool = True) -> list[np.ndarray]:
    """Per row, (n, D) image embeddings of the reference after edits 1..k, k = 1..n; an
    InputError names a query whose sentences are not one per edit or whose edits do not chain."""
    if not rows:
        raise InputError("no progression steps: the benchmark has no multi-sentence query")
    from cir_core.progress import bar as progress_bar
    from cir_core.world.films.stream import render_item
    from training.prefix_targets import intermediate_states

    todo, off = [], [0]
    for i in rows:
        states = intermediate_states(queries[i])
        if states is None:
            raise InputError(f"query {queries[i].query_id}: its sentences are not one per edit, or its edits "
                             "do not chain from the reference, so it has no drawn prefix")
        todo += [(item, seed) for item, seed, _ in states]
        off.append(len(todo))
    emb = []
    bar = progress_bar(total=len(todo), disable=not progress, unit="image", desc="drawn prefixes")
    for s in range(0, len(todo), 256):
        part = todo[s:s + 256]
        emb.append(backbone.encode_images([render_item(x, backbone.image_size, seed) for x, seed in part],
                                          batch_size=256))
        bar.update(len(part))
    bar.close()
    e = np.concatenate(emb).astype(np.float32)
    return [e[a:b] for a, b in zip(off, off[1:])]


def oracle_breakdown(bench: Any, backbone: Any, data: Any, steps: list[np.ndarray], n_boot: int = 2000) -> dict:
    """The drawn-prefix oracle's progression steps on `bench` (built with progression=True),
    `steps` its drawn prefixes (`oracle_steps` of the benchmark's progression rows)."""
    from cir_core.benchmarks.common import prefix_ranks
    from cir_core.methods import create_method
    from cir_core.metrics import progression_summary
    from cir_core.search.scoring import ScoreOpts

    from .progression_failures import breakdown, sentence_families, step_table

    queries, rows = bench.world.queries, bench.progression_rows()
    n = np.array([len(s) for s in steps])
    g, t = data.emb["gallery"], bench.truth
    # image-only: cosine against the gallery, its q_empty unused under cosine
    ranks = prefix_ranks(lambda j: steps[j], create_method("image-only", backbone), g, t["ref"][rows],
                         bench.step_targets(rows), ScoreOpts("cosine"), int(n.max()), data.norms.get("gallery"))
    out = breakdown(step_table(ranks, n, sentence_families(queries, rows)), n_boot)
    out["R@10_last_step"] = progression_summary(ranks, n)["R@10_last_step"]
    return out


def drawn_cosine(bench: Any, method: Any, data: Any, steps: list[np.ndarray]) -> dict[str, float]:
    """How near `method`'s prefix queries come to the drawn prefixes: the mean cosine of its query
    after k sentences to the drawn image after k edits, over every prefix of the progression rows
    (`steps` from `oracle_steps`), and the same for the full text (k = n) alone."""
    queries, rows = bench.world.queries, bench.progression_rows()
    every, last = [], []
    for j, i in enumerate(rows):
        r = int(bench.truth["ref"][i])
        q = np.stack(method.prefix_queries(data.refs("gallery", slice(r, r + 1)), list(queries[i].sentences)))
        q = q.reshape(len(steps[j]), -1)
        c = np.sum(q * steps[j], 1) / np.linalg.norm(q, axis=1) / np.linalg.norm(steps[j], axis=1)
        every += c.tolist()
        last.append(float(c[-1]))
    return {"prefixes": len(every), "mean_cos_to_drawn": round(float(np.mean(every)), 4),
            "mean_cos_to_drawn_full_text": round(float(np.mean(last)), 4)}


def main(argv: list[str] | None = None) -> int:
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method
    from cir_core.paths import DEFAULT_BACKBONE

    from .cli import checkpoint_arg, checkpoint_args
    from .progression_failures import method_breakdown

    ap = argparse.ArgumentParser(prog="python -m studies.progression_oracle", description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", default="films", choices=("films", "world"))
    ap.add_argument("--split", default="test", choices=("test", "val"))
    ap.add_argument("--n-queries", type=int, default=None, help="default: the split's (test 1000, val 500)")
    ap.add_argument("--n-films", type=int, default=None, help="films: default 104 (test), 24 (val)")
    ap.add_argument("--methods", default="pace,sum", help="beside the oracle, on the same steps ('' for none)")
    ap.add_argument("--checkpoint", action="append", default=[], metavar="METHOD=DIR")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    names = [m.strip() for m in a.methods.split(",") if m.strip()]
    folders = checkpoint_args(ap, [checkpoint_arg(ap, c) for c in a.checkpoint], names, False)
    bb = load_backbone(DEFAULT_BACKBONE)
    films = {"n_films": a.n_films} if a.benchmark == "films" else {}
    if a.n_films is not None and not films:
        ap.error("--n-films is for --benchmark films")
    bench = load_benchmark(a.benchmark, split=a.split, n_queries=a.n_queries, image_size=bb.image_size,
                           progression=True, **films)
    data = embed_benchmark(bench, bb)
    steps = oracle_steps(bench.world.queries, bench.progression_rows(), bb)
    results = {"oracle": oracle_breakdown(bench, bb, data, steps, a.bootstrap)}
    for name in names:
        method = create_method(name, bb, folders.get(name))
        results[name] = {**method_breakdown(bench, method, data, "cosine", a.bootstrap),
                         **drawn_cosine(bench, method, data, steps)}
    for name, r in results.items():
        fam = ", ".join(f"{f} {v['improved_or_held']} [{v['ci95'][0]}, {v['ci95'][1]}] ({v['steps']})"
                        for f, v in r["by_family"].items())
        print(f"{name}/cosine: {r['steps']} steps, improved or held {r['improved_or_held']} "
              f"[{r['ci95'][0]}, {r['ci95'][1]}]; by family: {fam}; worsened {r['worsened']}, "
              f"median factor x{r['median_worsening_factor']}"
              + (f"; cosine to the drawn prefix {r['mean_cos_to_drawn']} (full text {r['mean_cos_to_drawn_full_text']})"
                 if "mean_cos_to_drawn" in r else ""))
    if a.json:
        write_report(a.json, {"benchmark": a.benchmark, "split": a.split, "scoring": "cosine",
                              "backbone": bb.id, "checkpoints": {k: v or "shipped" for k, v in folders.items()},
                              "methods": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
