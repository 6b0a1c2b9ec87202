"""Evaluate methods × {cosine, Chord} on a benchmark: the generated world (default) or a real one
under its official protocol (docs/EVAL_REAL.md).

    python -m cir_core.eval [--split test] [--json r.json] [--dump-rankings rk.jsonl] [--progression]
    python -m cir_core.eval --benchmark cirr --root DIR [--split val|test] [--submission OUT.json]
    python -m cir_core.eval --split val --n-queries 500 --gallery milvus:world_val@URI   # searched in Milvus

Gallery embeddings are cached (a second run encodes nothing); each query's reference embedding
is read from the gallery, never re-encoded. World metrics: R@1/5/10/50 (reference excluded),
subset Rs@1/2/3, mAP@5/10/25/50, identity@1 (top-1 shows the reference's character) and edit@1
(top-1 satisfies the edit, whoever the character is). Values are fractions in [0, 1]. A thin
command line over `cir_core.eval.loop.evaluate`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cir_core.errors import CIRError
from cir_core.gallery_spec import parse_gallery_spec
from cir_core.paths import DEFAULT_BACKBONE
from cir_core.search.scoring import SCORINGS, VARIANTS
from cir_core.settings import EngineConfig, add_engine_args, apply_offline_default, settings_from

from ..report_header import write_report


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", default="world",
                    help="a registered benchmark (cir_core.benchmarks): world (default, generated), films (generated), "
                         "cirr, circo, fashioniq, genecis, lcirr, movienet")
    ap.add_argument("--root", type=Path, default=None, help="a real benchmark's data folder")
    ap.add_argument("--split", choices=("val", "test"), default=None,
                    help="default: test (world), val (real benchmarks)")
    ap.add_argument("--n-queries", type=int, default=None, help="world, films: default 1000 (test), 500 (val)")
    ap.add_argument("--n-films", type=int, default=None, help="films: default 104 (test), 24 (val)")
    ap.add_argument("--progression", action="store_true",
                    help="world: also measure R@10 after sentence 1 vs after all sentences (multi-sentence queries)")
    ap.add_argument("--protocol", default=None,
                    help="where published code disagrees (printed with every table): circo keep-reference "
                         "(default, the authors' code) | remove-reference; fashioniq clip4cir (default) | both-orders")
    ap.add_argument("--preprocess", choices=("backbone", "targetpad"), default=None,
                    help="real benchmarks' images: the backbone's own resize + centre crop (default) or "
                         "SEARLE's targetpad (pad to aspect ratio 1.25 first; printed with every table)")
    ap.add_argument("--subset", default=None,
                    help="evaluate only these GeneCIS tasks / FashionIQ categories (comma-separated); "
                         "without it every one is required")
    ap.add_argument("--submission", type=Path, default=None,
                    help="write the test server's file(s) here (one method, one scoring)")
    ap.add_argument("--scoring", default="cosine,chord")
    ap.add_argument("--lambda", dest="lam", type=float, default=None,
                    help="Chord λ for every method (default: each method's own, 0.34 for baselines)")
    ap.add_argument("--chord-variant", choices=VARIANTS, default="empty",
                    help="direction q − q_∅ (default) or q − v_r")
    ap.add_argument("--gallery", default=None, metavar="milvus:COLLECTION@URI",
                    help="search the benchmark's gallery in this Milvus collection (built from the same gallery: "
                         "python -m cir_core.index build --backend milvus --gallery world:val ...): each query's "
                         "shortlist re-scored exactly; the vectors stay in Milvus [CIR_MILVUS_TOKEN]")
    ap.add_argument("--json", type=Path, help="write the report here")
    ap.add_argument("--dump-rankings", type=Path, help="one JSON line per (method, scoring, query)")
    add_engine_args(ap, gallery=False, methods_help="every registered method")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = settings_from(EngineConfig, args)
        apply_offline_default(cfg.uses_hub())
        report, raw, bench = run(args, cfg)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from cir_core.eval.loop import format_progressions, format_table

    print(format_table(report))
    for line in format_progressions(report):
        print(line)
    if args.submission:
        if not raw:
            print(f"error: no submission: the method was skipped ({report['skipped']})", file=sys.stderr)
            return 2
        for path in bench.write_submission(next(iter(raw.values())), args.submission):
            print(f"wrote {path}")
    if args.json:
        write_report(args.json, report, device=cfg.device or "cpu")
        print(f"wrote {args.json}")
    return 0


def run(args: argparse.Namespace, cfg: EngineConfig):
    """Check everything the user typed, then load, evaluate: (report, raw results, benchmark)."""
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import is_generated, load_benchmark
    from cir_core.eval.loop import evaluate
    from cir_core.methods import list_methods

    scorings = [s.strip() for s in args.scoring.split(",") if s.strip()]
    if not scorings or any(s not in SCORINGS for s in scorings):
        raise CIRError(f"unknown scoring in {args.scoring!r}; choose from {SCORINGS}")
    methods = list(cfg.methods) if cfg.methods else list_methods()
    unknown = [m for m in methods if m not in list_methods()]
    if unknown:
        raise CIRError(f"unknown method(s) {unknown}; registered: {list_methods()}")
    if args.submission and (len(methods) != 1 or len(scorings) != 1):
        raise CIRError("--submission needs exactly one --methods entry and one --scoring")
    for out in (args.json, args.dump_rankings, args.submission):
        _check_writable(out)
    generated = is_generated(args.benchmark)
    world_opts = {"n_queries": args.n_queries, "progression": args.progression, "n_films": args.n_films}
    bench = None if generated else load_benchmark(args.benchmark, args.root, args.split,
                                                  protocol=args.protocol, subset=args.subset,
                                                  preprocess=args.preprocess)
    if args.submission and not hasattr(bench, "write_submission"):
        raise CIRError(f"{args.benchmark} has no test server; --submission applies to cirr and circo")
    spec = parse_gallery_spec(args.gallery) if args.gallery else None
    if spec is not None and spec.kind != "milvus":
        raise CIRError(f"--gallery {args.gallery!r}: the evaluation searches a benchmark's own gallery, here or in "
                       "a Milvus collection (milvus:COLLECTION@URI)")
    if spec is not None and args.progression:
        raise CIRError("--progression ranks every target in the whole gallery, which Milvus does not answer (it "
                       "returns a shortlist): leave out --gallery or --progression")
    backbone = load_backbone(cfg.backbone or DEFAULT_BACKBONE, cfg.pretrained, device=cfg.device)
    remote = None
    if spec is not None:  # connected before any embedding: a dead server fails now
        from cir_core.gallery_spec import GalleryContext, open_gallery_spec
        from cir_core.index import milvus  # noqa: F401  (the milvus opener)

        remote = open_gallery_spec(spec, GalleryContext(backbone.image_size, backbone=backbone,
                                                        milvus_token=cfg.milvus_token))
    if bench is None:
        bench = load_benchmark(args.benchmark, args.root, args.split, image_size=backbone.image_size,
                               protocol=args.protocol, subset=args.subset, preprocess=args.preprocess,
                               **world_opts)
    dump = open(args.dump_rankings, "w") if args.dump_rankings else None
    try:
        report, raw = evaluate(bench, backbone, methods, scorings, args.lam, args.chord_variant,
                               Path(cfg.cache_dir) if cfg.cache_dir else None,
                               checkpoints=checkpoint_folders(cfg, methods), dump=dump, remote=remote)
    finally:
        if dump:
            dump.close()
    return report, raw, bench


def checkpoint_folders(cfg: EngineConfig, methods: list[str]) -> dict[str, str] | None:
    """{method: folder} from --checkpoints (a folder of <method>/ or a Hub repo) and --checkpoint
    overrides; None: the shipped checkpoints."""
    if not cfg.checkpoints:
        return dict(cfg.method_checkpoints) or None
    from cir_core.checkpoint_source import resolve_checkpoints

    src = resolve_checkpoints(cfg.checkpoints, methods, overrides=cfg.method_checkpoints)
    if src.folder is None:
        raise CIRError(src.error or f"no checkpoints at {cfg.checkpoints}")
    return {n: str(src.folder_for(n)) for n in methods}


def _check_writable(path: Path | None) -> None:
    """Create an output's folder now, or refuse, before any model loads."""
    if path is None:
        return
    parent = path.expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CIRError(f"cannot create the folder of {path}: {e.strerror}") from None
    if path.is_dir():
        raise CIRError(f"{path} is a folder; give a file name")


