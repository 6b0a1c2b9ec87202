"""Does an exported split rank exactly as the native world evaluation? Compares two ranking dumps
(`python -m cir_core.eval ... --dump-rankings`), the native one and the export's, through the
export's `world_export.json`:

    python -m cir_core.world.export.check NATIVE.jsonl EXPORT.jsonl --export DIR

Every (method, scoring, query) of the native dump must be in the export's with the same top list
(exported names mapped back to world item ids); prints a JSON summary, exit 1 on any difference.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cir_core.fileio import loads_json

from .run import PROVENANCE


def read_dump(path: str | Path) -> dict[tuple[str, str, str], list[str]]:
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = loads_json(line)
                out[(r["method"], r["scoring"], str(r["query_id"]))] = [str(x) for x in r["top"]]
    return out


def compare(native: str | Path, exported: str | Path, export_dir: str | Path) -> dict[str, Any]:
    """{"rankings": n compared, "identical": n equal, "differ": [first keys that differ], "missing": n}."""
    prov = loads_json((Path(export_dir) / PROVENANCE).read_text(encoding="utf-8"))
    items, queries = prov["items"], prov["queries"]
    nat = read_dump(native)
    got = {(m, s, queries[q]): [items[x] for x in top] for (m, s, q), top in read_dump(exported).items()}
    same = [k for k in nat if got.get(k) == nat[k]]
    differ = [k for k in nat if k in got and got[k] != nat[k]]
    missing = [k for k in nat if k not in got]
    return {"rankings": len(nat), "identical": len(same), "differ": [list(k) for k in differ[:5]],
            "n_differ": len(differ), "missing": len(missing),
            "methods": sorted({k[0] for k in nat}), "scorings": sorted({k[1] for k in nat})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cir_core.world.export.check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("native", type=Path)
    ap.add_argument("exported", type=Path)
    ap.add_argument("--export", type=Path, required=True, help="the export folder (its world_export.json)")
    args = ap.parse_args(argv)
    res = compare(args.native, args.exported, args.export)
    print(json.dumps(res))
    return 0 if res["identical"] == res["rankings"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
