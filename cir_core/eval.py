"""Evaluate every registered method × {cosine, Chord} on a held-out split of the generated world,
or on a real benchmark under its official protocol (docs/EVAL_REAL.md).

    python -m cir_core.eval [--split test] [--json r.json] [--dump-rankings rk.jsonl]
    python -m cir_core.eval --benchmark cirr --root DIR [--split val|test] [--submission OUT.json]

Gallery embeddings are cached (a second run encodes nothing); each query's reference embedding
is read from the gallery, never re-encoded. Metrics: R@1/5/10/50 (reference excluded), CIRR
subset Rs@1/2/3, CIRCO mAP@5/10/25/50, identity@1 (top-1 shows the reference's character) and
edit@1 (top-1 satisfies the edit, whoever the character is). Values are fractions in [0, 1].
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from cir_core.config import cache_dir
from cir_core.errors import CIRError
from cir_core.metrics import edit_at_1, identity_at_1, map_at_k, recall_at_k, subset_recall_at_k
from cir_core.scoring import chord_scores, cosine_scores

SCORINGS = ("cosine", "chord")
METRIC_ORDER = ("R@1", "R@5", "R@10", "R@50", "Rs@1", "Rs@2", "Rs@3", "mAP@5", "mAP@10",
                "mAP@25", "mAP@50", "identity@1", "edit@1")
TOP = 50


def score_matrix(method, q: np.ndarray, q0: np.ndarray, refs: np.ndarray, gallery: np.ndarray,
                 scoring: str, lam: float | None, variant: str, exclude: np.ndarray) -> np.ndarray:
    """(Q, N) exact scores with each query's reference set to -inf."""
    if scoring == "cosine":
        s = cosine_scores(q, gallery)
    else:
        s = chord_scores(q, q0, refs, gallery, lam=method.chord_lambda if lam is None else lam,
                         variant=variant)
    s[np.arange(len(s)), exclude] = -np.inf
    return s


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(scores, part, 1).argsort(1)[:, ::-1]
    return np.take_along_axis(part, order, 1)


def metrics_for(scores: np.ndarray, bench, gt: list[set[int]], edit_ok: list[set[int]],
                identities: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    ranked = top_k(scores, TOP)
    target = np.asarray(bench.target_idx)
    subsets = np.asarray(bench.subsets)
    sub_scores = np.take_along_axis(scores, subsets, 1)
    sub_ranked = np.take_along_axis(subsets, (-sub_scores).argsort(1, kind="stable"), 1)
    ref_id = identities[np.asarray(bench.reference_idx)]
    out = {**recall_at_k(ranked, target), **subset_recall_at_k(sub_ranked, subsets, target),
           **map_at_k(ranked, gt), "identity@1": identity_at_1(identities[ranked[:, 0]], ref_id),
           "edit@1": edit_at_1(ranked, edit_ok)}
    return {k: round(float(out[k]), 4) for k in METRIC_ORDER}, ranked


def breakdown(ranked: np.ndarray, bench) -> dict[str, float]:
    """R@10 per edit type and for queries with / without held-out combinations."""
    hit = (ranked[:, :10] == np.asarray(bench.target_idx)[:, None]).any(1)
    groups: dict[str, list[bool]] = {}
    for h, q in zip(hit, bench.queries):
        groups.setdefault(f"R@10[{q.edit_type}]", []).append(h)
        groups.setdefault("R@10[novel]" if q.novel else "R@10[seen]", []).append(h)
    return {k: round(float(np.mean(v)), 4) for k, v in sorted(groups.items())}


def progression_report(method, bench, emb: np.ndarray, scoring: str = "cosine",
                       lam: float | None = None) -> dict[str, float]:
    """Does retrieval sharpen as sentences accumulate? Over multi-sentence queries: R@10 after
    the first sentence and after all of them, and the share of queries whose target rank
    improves (or holds) from step 1 to step n. Uses the method's own progression (PACE's
    accumulator states; other methods recompose each prefix)."""
    rows = [i for i, q in enumerate(bench.queries) if len(q.sentences) > 1]
    if not rows:
        return {}
    ranks_first, ranks_last = [], []
    for i in rows:
        q = bench.queries[i]
        r = bench.reference_idx[i]
        steps = np.stack(method.progression(emb[r], list(q.sentences)))
        q0 = method.compose_empty(emb[r][None])
        refs = np.repeat(emb[r][None], len(steps), 0)
        s = score_matrix(method, steps, np.repeat(q0, len(steps), 0), refs, emb, scoring, lam,
                         "empty", np.full(len(steps), r))
        target_score = s[:, bench.target_idx[i]]
        rank = (s > target_score[:, None]).sum(1)  # 0 = top-1
        ranks_first.append(rank[0])
        ranks_last.append(rank[-1])
    first, last = np.asarray(ranks_first), np.asarray(ranks_last)
    return {"queries": len(rows), "R@10_first_sentence": round(float((first < 10).mean()), 4),
            "R@10_all_sentences": round(float((last < 10).mean()), 4),
            "rank_improved": round(float((last < first).mean()), 4),
            "rank_improved_or_held": round(float((last <= first).mean()), 4),
            "median_rank_first": float(np.median(first)), "median_rank_last": float(np.median(last))}


def evaluate(backbone, bench, methods: list[str], scorings=SCORINGS, lam: float | None = None,
             variant: str = "empty", cache: Path | None = None, dump=None, progress: bool = True,
             checkpoints: dict[str, str] | None = None, progression: bool = False) -> dict:
    """The evaluation table {method: {scoring: {metric: value}}} plus breakdowns and skips."""
    from cir_core.gallery import EmbeddingCache
    from cir_core.methods.factory import create_methods

    gallery = bench.gallery(backbone.image_size)
    emb = EmbeddingCache(cache or cache_dir()).embed(gallery, backbone, progress=progress)
    refs_idx = np.asarray(bench.reference_idx)
    refs = emb[refs_idx]
    texts = [q.text for q in bench.queries]
    gt, edit_ok = bench.gt_sets(), bench.edit_ok_sets()
    identities = np.asarray(bench.identities())
    results, extra, skipped, timing, prog = {}, {}, {}, {}, {}
    for name, m in create_methods(methods, backbone, checkpoints, skipped):
        t0 = time.perf_counter()
        q, q0 = m.compose(refs, texts), m.compose_empty(refs)
        timing[name] = round((time.perf_counter() - t0) / len(texts) * 1000, 3)
        results[name], extra[name] = {}, {}
        for sc in scorings:
            scores = score_matrix(m, q, q0, refs, emb, sc, lam, variant, refs_idx)
            results[name][sc], ranked = metrics_for(scores, bench, gt, edit_ok, identities)
            extra[name][sc] = breakdown(ranked, bench)
            if progression:
                prog.setdefault(name, {})[sc] = progression_report(m, bench, emb, sc, lam)
            if dump is not None:
                for qi, query in enumerate(bench.queries):
                    dump.write(json.dumps({
                        "method": name, "scoring": sc, "query_id": query.query_id,
                        "reference_id": bench.items[refs_idx[qi]].item_id,
                        "top50": [bench.items[j].item_id for j in ranked[qi]],
                        "target_id": bench.items[bench.target_idx[qi]].item_id,
                        "gt_ids": sorted(bench.items[j].item_id for j in gt[qi])}) + "\n")
    return {"split": bench.split, "results": results, "breakdown": extra, "progression": prog,
            "skipped": skipped,
            "compose_ms_per_query": timing, "backbone": backbone.id,
            "n_queries": len(bench.queries), "gallery_size": len(bench.items)}


def format_table(report: dict) -> str:
    cols = ["method", "scoring", *METRIC_ORDER]
    rows = [[m, sc, *(f"{100 * v[k]:.1f}" for k in METRIC_ORDER)]
            for m, by in report["results"].items() for sc, v in by.items()]
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    line = lambda r: "  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    head = (f"split={report['split']}  queries={report['n_queries']}  gallery={report['gallery_size']}"
            f"  backbone={report['backbone']}  (values in %)")
    return "\n".join([head, line(cols), line(["-" * w for w in widths]), *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    from cir_core.backbone import DEFAULT_MODEL, load_backbone
    from cir_core.methods import list_methods
    from cir_core.world import build_benchmark

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("val", "test"), default=None,
                    help="default: test (world), val (--benchmark)")
    ap.add_argument("--benchmark", default=None,
                    help="a real benchmark: cirr, circo, fashioniq, genecis, lcirr, movienet")
    ap.add_argument("--root", type=Path, default=None, help="the benchmark's data folder")
    ap.add_argument("--submission", type=Path, default=None,
                    help="write the test server's file(s) here (one method, one scoring)")
    ap.add_argument("--n-queries", type=int, default=None, help="default: 1000 (test), 500 (val)")
    ap.add_argument("--backbone", default=DEFAULT_MODEL, help="open_clip name, local-dir:PATH or hf-hub:ID")
    ap.add_argument("--pretrained", default=None, help="open_clip tag or a local weights file")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--methods", default=None, help="comma-separated; default: every registered method")
    ap.add_argument("--scoring", default="cosine,chord")
    ap.add_argument("--lambda", dest="lam", type=float, default=None,
                    help="Chord λ for every method (default: each method's own, 0.34 for baselines)")
    ap.add_argument("--chord-variant", choices=("empty", "reference"), default="empty",
                    help="direction q − q_∅ (default) or q − v_r")
    ap.add_argument("--checkpoint", action="append", default=[], metavar="METHOD=DIR",
                    help="load METHOD from DIR instead of assets/methods/METHOD (repeatable; ablations)")
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, help="write {split, results, ...} here")
    ap.add_argument("--dump-rankings", type=Path, help="one JSON line per (method, scoring, query)")
    ap.add_argument("--progression", action="store_true",
                    help="also measure R@10 after sentence 1 vs after all sentences (multi-sentence queries)")
    args = ap.parse_args(argv)
    try:
        scorings = [s.strip() for s in args.scoring.split(",") if s.strip()]
        bad = [s for s in scorings if s not in SCORINGS]
        if bad:
            raise CIRError(f"unknown scoring {bad}; choose from {SCORINGS}")
        methods = [m.strip() for m in args.methods.split(",")] if args.methods else list_methods()
        unknown = [m for m in methods if m not in list_methods()]
        if unknown:
            raise CIRError(f"unknown method(s) {unknown}; registered: {list_methods()}")
        checkpoints = dict(c.split("=", 1) for c in args.checkpoint if "=" in c)
        if len(checkpoints) != len(args.checkpoint):
            raise CIRError(f"--checkpoint takes METHOD=DIR, got {args.checkpoint}")
        if args.benchmark or args.root or args.submission:
            return _run_benchmark(args, methods, scorings, checkpoints)
        backbone = load_backbone(args.backbone, args.pretrained, device=args.device)
        args.split = args.split or "test"
        n = args.n_queries or (1000 if args.split == "test" else 500)
        bench = build_benchmark(args.split, n)
        dump = open(args.dump_rankings, "w") if args.dump_rankings else None
        try:
            report = evaluate(backbone, bench, methods, scorings, args.lam, args.chord_variant,
                              args.cache_dir, dump, checkpoints=checkpoints,
                              progression=args.progression)
        finally:
            if dump:
                dump.close()
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(report))
    for name, by in report["progression"].items():
        for sc, p in by.items():
            print(f"progression {name}/{sc}: " + ", ".join(f"{k}={v}" for k, v in p.items()))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")
    return 0


def _run_benchmark(args, methods: list[str], scorings: list[str], checkpoints: dict[str, str]) -> int:
    """--benchmark NAME --root DIR: load and validate, evaluate, print, write JSON/submission."""
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import format_table as bench_table
    from cir_core.benchmarks import load_benchmark, run

    if not (args.benchmark and args.root):
        raise CIRError("--benchmark NAME and --root DIR go together (and --submission needs both)")
    if args.submission and (len(methods) != 1 or len(scorings) != 1):
        raise CIRError("--submission needs exactly one --methods entry and one --scoring")
    bench = load_benchmark(args.benchmark, args.root, args.split or "val")
    if args.submission and not hasattr(bench, "write_submission"):
        raise CIRError(f"{args.benchmark} has no test server; --submission applies to cirr and circo")
    backbone = load_backbone(args.backbone, args.pretrained, device=args.device)
    dump = open(args.dump_rankings, "w") if args.dump_rankings else None
    try:
        report, raw = run(bench, backbone, methods, scorings, args.lam, args.chord_variant,
                          args.cache_dir, checkpoints=checkpoints, dump=dump)
    finally:
        if dump:
            dump.close()
    print(bench_table(report))
    for name, by in report["extra"].items():
        for sc, extra in by.items():
            if "progression" in extra:
                print(f"progression {name}/{sc}: " + ", ".join(
                    f"{k}={v:.3f}" for k, v in extra["progression"].items()))
    if args.submission:
        if not raw:
            raise CIRError(f"no submission: method {methods[0]} was skipped ({report['skipped']})")
        for path in bench.write_submission(next(iter(raw.values())), args.submission):
            print(f"wrote {path}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
