"""`python -m cir_core.benchmarks.movienet build --release ROOT --out DIR --preset identity-200|qualitative-1151`

Turns MovieNet as released (meta/, annotation/, keyframes/) into an identity set
(`--gallery movienet:DIR`, `--benchmark movienet --root DIR`). Two steps when the edits are
generated (docs/MOVIENET.md):

    python -m cir_core.benchmarks.movienet build --release /data/movienet --out set --preset identity-200
    python -m training.build_itt --manifest set/references.jsonl --out set/itt.jsonl --types scene,short
    python -m cir_core.benchmarks.movienet build --release /data/movienet --out set --preset identity-200 \\
        --edits set/itt.jsonl

(the same seed and flags pick the same references). `--edits` also takes a user's CSV/JSONL.
"""
from __future__ import annotations

import argparse
import json
import sys

from ...errors import CIRError
from ...settings import add_seed_arg
from .build import PRESETS, ReferenceRules, build_set, scaled
from .edits import read_edits
from .release import BOX_SLACK


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m cir_core.benchmarks.movienet", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a set from MovieNet's release")
    b.add_argument("--release", required=True, help="the release root (meta/, annotation/, keyframes/)")
    b.add_argument("--out", required=True, help="the set's folder (new, empty, or an earlier build)")
    b.add_argument("--preset", required=True, choices=sorted(PRESETS), help="the shape of PACT's Table 15")
    b.add_argument("--films", nargs="+", metavar="IMDB_ID", help="read only these films (default: every annotated film)")
    add_seed_arg(b, what="the reference and gallery draws")
    b.add_argument("--edits", help="CSV/JSONL of edits (query_id, reference_frame or ITT image_id, edit[, edit_type])")
    s = b.add_argument_group("scaling (default: the preset's counts)")
    for name in ("n-queries", "n-references", "n-ref-films", "n-gallery", "n-gallery-films"):
        s.add_argument(f"--{name}", type=int)
    r = b.add_argument_group("reference rules (docs/MOVIENET.md)")
    d = ReferenceRules()
    r.add_argument("--min-height", type=float, default=d.min_height, help="body box height / frame height (R3)")
    r.add_argument("--min-area", type=float, default=d.min_area, help="body box area / frame area (R3)")
    r.add_argument("--max-overlap", type=float, default=d.max_overlap, help="IoU with any other person box (R4)")
    r.add_argument("--min-positives", type=int, default=d.min_positives,
                   help="keyframes of other shots showing the character (R5)")
    r.add_argument("--positives", type=int, default=d.positives, help="of those, kept in the gallery per reference")
    b.add_argument("--box-slack", type=float, default=BOX_SLACK,
                   help="how far a body box may overhang its frame, as a share of the frame's side, and be "
                        "clipped (reported in build.json); further out it is refused (default %(default)s)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        preset = scaled(PRESETS[a.preset], n_queries=a.n_queries, n_references=a.n_references,
                        n_ref_films=a.n_ref_films, n_gallery=a.n_gallery, n_gallery_films=a.n_gallery_films)
        rules = ReferenceRules(a.min_height, a.min_area, a.max_overlap, a.min_positives, a.positives)
        edits = read_edits(a.edits) if a.edits else None
        summary = build_set(a.release, a.out, preset, films=a.films, seed=a.seed, rules=rules, edits=edits,
                            progress=not a.quiet, box_slack=a.box_slack)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in summary.items() if k != "clipped"}))
    if summary["clipped_boxes"]:
        print(f"{summary['clipped_boxes']} body boxes overhung their frame by at most {a.box_slack:.0%} and were "
              f"clipped (listed in {a.out}/build.json), e.g. {summary['clipped'][0]}", file=sys.stderr)
    if edits is None:
        print(f"no --edits: wrote {a.out}/references.jsonl; generate edits from it (python -m training.build_itt "
              f"--manifest {a.out}/references.jsonl --out {a.out}/itt.jsonl) or write your own, then rerun with "
              "--edits FILE", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
