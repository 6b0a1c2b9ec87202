"""`python -m cir_core.reproduce list|run|docs|rehearse`: see the package's docstring and
docs/REPRODUCE.md."""
from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from pathlib import Path

from cir_core.errors import CIRError, InputError

DEFAULT_OUT = Path("runs/reproduce")


def pairs(values: list[str], what: str) -> tuple[Path | None, dict[str, Path]]:
    """`--root DATA` and `--root KEY=DIR` (repeatable): (DATA, {KEY: DIR})."""
    base, named = None, {}
    for v in values:
        if "=" in v:
            k, _, d = v.partition("=")
            if not k or not d:
                raise InputError(f"{what} {v!r}: expected KEY=DIR")
            named[k] = Path(d).expanduser()
        elif base is not None:
            raise InputError(f"{what} given twice without KEY= ({base}, {v})")
        else:
            base = Path(v).expanduser()
    return base, named


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m cir_core.reproduce", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--registry", default="published",
                       help="published (default), rehearsal, or a registry JSON file")
        p.add_argument("--root", action="append", default=[], metavar="DATA|KEY=DIR",
                       help="the data: DATA/<dataset> for each dataset, or one dataset's folder as "
                            "KEY=DIR (repeatable)")
        p.add_argument("--checkpoints", type=Path, default=None,
                       help="a folder holding each checkpoint's folder (ckpt/searle-vit-l-14, ...)")
        p.add_argument("--checkpoint", action="append", default=[], metavar="KEY=DIR",
                       help="one checkpoint's folder, by its registry key (repeatable)")
        p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")

    p = sub.add_parser("list", help="every row: what it needs, and whether it can run here")
    common(p)
    p.add_argument("--table", default="all", help="one table's rows (default: all)")
    p.add_argument("--json", action="store_true", help="one JSON object per row instead of text")
    p = sub.add_parser("run", help="run a table's rows and compare with the published values")
    common(p)
    p.add_argument("table", help="a table of the registry (the first part of a row id: dice-1, pact-14, world; "
                                  "docs/REPRODUCE.md lists them), or all")
    p.add_argument("--rows", default=None, help="comma-separated row ids or patterns (dice-1:L14:*)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"report folder (default {DEFAULT_OUT})")
    p.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default $CIR_CACHE_DIR)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p = sub.add_parser("docs", help="write docs/REPRODUCE.md from the registries")
    p.add_argument("--out", type=Path, default=None, help="the file (default: print it)")
    p = sub.add_parser("rehearse", help="export the world's datasets and run every rehearsal row")
    p.add_argument("--out", type=Path, required=True, help="the folder: data/ (the exports) and the reports")
    p.add_argument("--record", action="store_true",
                   help="write the measured values into the rehearsal registry as its recorded values")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return ap


def select(rows: list, patterns: str | None) -> list:
    """`rows` whose id matches one of the comma-separated `patterns` (all when None)."""
    if patterns is None:
        return rows
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen = [r for r in rows if any(fnmatch.fnmatchcase(r.id, p) for p in pats)]
    unmatched = [p for p in pats if not any(fnmatch.fnmatchcase(r.id, p) for r in rows)]
    if unmatched or not chosen:
        raise InputError(f"--rows: {unmatched[0] if unmatched else patterns!r} matches no row of this table")
    return chosen


def sources_from(args: argparse.Namespace):
    from .needs import Sources

    base, named = pairs(args.root, "--root")
    _, ckpts = pairs(args.checkpoint, "--checkpoint") if args.checkpoint else (None, {})
    return Sources(base, named, args.checkpoints.expanduser() if args.checkpoints else None, ckpts, args.device)


def run_table(reg, table: str, rows: list, sources, out: Path, cache: Path | None, progress: bool) -> int:
    """Run, write OUT/<table>.json and .md, print the markdown; 1 when a row is outside tolerance."""
    from .report import build_report, markdown
    from .runner import run_rows

    out.mkdir(parents=True, exist_ok=True)
    results = run_rows(reg, rows, sources, cache, out, progress)
    report = build_report(reg, table, results, sources.device)
    (out / f"{table}.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    md = markdown(reg, report)
    (out / f"{table}.md").write_text(md)
    print(md)
    print(f"wrote {out / f'{table}.md'} and {out / f'{table}.json'}", file=sys.stderr)
    return 1 if report["summary"]["outside"] else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from cir_core.settings import apply_offline_default

    apply_offline_default(False)
    try:
        return dispatch(args)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def dispatch(args: argparse.Namespace) -> int:
    from .registry import REHEARSAL, load_registry

    if args.cmd == "docs":
        from .docs import reproduce_md

        text = reproduce_md(load_registry("published"), load_registry("rehearsal"))
        if args.out is None:
            print(text, end="")
        else:
            args.out.write_text(text, encoding="utf-8")
            print(f"wrote {args.out}", file=sys.stderr)
        return 0
    if args.cmd == "rehearse":
        from .needs import Sources
        from .rehearsal import export_datasets, record

        reg = load_registry("rehearsal")
        data = export_datasets(reg, args.out / "data", progress=not args.quiet)
        status = run_table(reg, "all", list(reg.rows), Sources(args.out / "data", data), args.out,
                           args.out / "cache", not args.quiet)
        if args.record:
            report = json.loads((args.out / "all.json").read_text())
            print(f"recorded {record(REHEARSAL, report)} rows into {REHEARSAL.name}", file=sys.stderr)
            return 0
        return status
    reg = load_registry(args.registry)
    sources = sources_from(args)
    if args.cmd == "list":
        from .docs import listing
        from .needs import check

        rows = reg.table_rows(args.table)
        if args.json:
            for r in rows:
                print(json.dumps({"id": r.id, "label": r.label, "needs": [
                    {"what": n.what, "text": n.text, "blocking": n.blocking, "here": n.ok}
                    for n in check(reg, r, sources)]}, ensure_ascii=False))
        else:
            print(listing(reg, rows, sources))
        return 0
    rows = select(reg.table_rows(args.table), args.rows)
    return run_table(reg, args.table, rows, sources, args.out, args.cache_dir, not args.quiet)


if __name__ == "__main__":
    sys.exit(main())
