"""`python -m cir_core.world.export FORMAT --split S --out DIR`: see the package's docstring."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cir_core.errors import CIRError
from cir_core.formats.fashioniq import CATEGORIES

from .run import DEFAULT_SIZE, FORMATS, SPLITS, export


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m cir_core.world.export",
                                 description="Write a split of the generated world in a benchmark's official format.")
    ap.add_argument("format", choices=FORMATS)
    ap.add_argument("--split", default="test", choices=SPLITS,
                    help="the world's split (train: itt, cirr and lcirr only; the training stream)")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    ap.add_argument("--n-queries", type=int, default=None,
                    help="default: as the world benchmark (test 1000, val 500; train 1000)")
    ap.add_argument("--image-size", type=int, default=DEFAULT_SIZE,
                    help=f"pixels per side (default {DEFAULT_SIZE}, the shipped backbone's input; the "
                         "native evaluation renders at the backbone's size, so match it for an exact round trip)")
    ap.add_argument("--category", default="dress", choices=CATEGORIES, help="fashioniq: the category the world goes under")
    ap.add_argument("--n-films", type=int, default=None, help="movienet-release: default 104 (test), 24 (val)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = export(args.format, args.split, args.out, n_queries=args.n_queries,
                         image_size=args.image_size, category=args.category, progress=not args.quiet,
                         n_films=args.n_films)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
