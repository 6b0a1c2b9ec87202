"""Two JSON reports compared leaf by leaf, the run-dependent fields left out: is a change
number-neutral?

    python bench/report_diff.py before.json after.json [--ignore seconds,date,...]

Every leaf (a dict key path or list index down to a number, string, bool or null) of one report
must be in the other with the same value and type: a float is compared exactly, not within a
tolerance. Keys named in `--ignore` (default: timing, date, host and load fields) are skipped at
any depth. Prints how many leaves were compared and each difference; exit status 1 when any.
Used for issue 43: `python -m cir_core.eval --progression --json` and the film evaluation on the
commit before a refactor and after it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator

RUN_FIELDS = ("header", "seconds", "date", "time", "host", "hostname", "machine", "load", "wall_s", "elapsed",
              "started", "finished")


def leaves(x: Any, ignore: frozenset[str], path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, value) of every leaf of `x`; dict keys in `ignore` are skipped with what is below them."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k not in ignore:
                yield from leaves(v, ignore, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, ignore, path + (i,))
    else:
        yield path, x


def diff(a: Any, b: Any, ignore: frozenset[str] = frozenset(RUN_FIELDS)) -> dict[str, Any]:
    """{"compared", "only_a", "only_b", "differ"}: leaf paths as "/"-joined strings; `differ`
    holds (path, value in a, value in b)."""
    la, lb = dict(leaves(a, ignore)), dict(leaves(b, ignore))
    name = lambda p: "/".join(map(str, p))  # noqa: E731
    return {"compared": len(la.keys() & lb.keys()),
            "only_a": sorted(name(p) for p in la.keys() - lb.keys()),
            "only_b": sorted(name(p) for p in lb.keys() - la.keys()),
            "differ": [(name(p), la[p], lb[p]) for p in la if p in lb
                       and (la[p] != lb[p] or type(la[p]) is not type(lb[p]))]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/report_diff.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--ignore", default=",".join(RUN_FIELDS), help="keys skipped at any depth (comma-separated)")
    args = ap.parse_args(argv)
    ignore = frozenset(k for k in args.ignore.split(",") if k)
    d = diff(json.loads(args.a.read_text()), json.loads(args.b.read_text()), ignore)
    bad = len(d["only_a"]) + len(d["only_b"]) + len(d["differ"])
    print(f"{args.a} vs {args.b}: {d['compared']} leaves compared, {len(d['only_a'])} only in the first, "
          f"{len(d['only_b'])} only in the second, {len(d['differ'])} differ (ignored: {', '.join(sorted(ignore))})")
    for p in d["only_a"]:
        print(f"  only in {args.a}: {p}")
    for p in d["only_b"]:
        print(f"  only in {args.b}: {p}")
    for p, x, y in d["differ"]:
        print(f"  {p}: {x!r} -> {y!r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
