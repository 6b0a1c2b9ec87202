"""The matrix rehearsed offline: the rehearsal registry's datasets exported from the generated
world (`cir_core.world.export`), its rows run on the shipped backbone and world-trained
checkpoints, and — once, on the project's machine — its "published" values recorded from such a
run (`record`), so that a later run must match them exactly."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cir_core.fileio import loads_json

from .registry import Registry, RegistryError


def export_datasets(reg: Registry, root: Path, progress: bool = False) -> dict[str, Path]:
    """Each dataset with an `export` written under ROOT/<key> (kept when already there, as an
    export refuses a folder that is not empty); {key: folder}."""
    from cir_core.world.export import export

    out = {}
    for key, ds in reg.datasets.items():
        if ds.export is None:
            continue
        folder = root / key
        if not (folder / "world_export.json").is_file():
            e = dict(ds.export)
            export(e.pop("format"), e.pop("split"), folder, progress=progress, **e)
        out[key] = folder
    return out


def record(path: Path, report: dict[str, Any]) -> int:
    """Write a run's measured values into the rehearsal registry at `path` as its recorded
    values (rounded to each table's decimals), with where and when they were measured; the
    number of rows written. Refuses a published registry and a report with a row not measured."""
    from .registry import load_registry

    reg = load_registry(path)
    if reg.kind != "rehearsal":
        raise RegistryError(f"{path.name}: kind {reg.kind!r}: only a rehearsal registry records measured values")
    measured = {r["id"]: r for r in report["rows"]}
    raw = loads_json(path.read_text(encoding="utf-8"))
    n = 0
    for row in raw["rows"]:
        got = measured.get(row["id"])
        if got is None:
            continue
        if got["status"] not in ("reproduced", "outside"):
            raise RegistryError(f"{path.name}: row {row['id']!r} was not measured ({got['status']}: {got['reason']})")
        d = reg.tables[row["table"]].decimals
        row["values"] = {m: round(got["measured"][m], d) for m in row["values"]}
        n += 1
    h = report["header"]
    raw["recorded"] = {"date": h["date"], "commit": h["commit"], "dirty": h["dirty"], "device": h["device"],
                       "load_1m": h["load"]["load_1m"], "cpus": h["load"]["cpus"],
                       "platform": h["machine"]["platform"], "versions": h["versions"], "command": h["command"]}
    path.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return n
