"""A run's report: published vs measured vs Δ for every row, as JSON (with the project's report
header) and as markdown; rows outside their tolerance are marked in both, never left out."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from cir_core.report_header import report_header

from .registry import Registry
from .runner import STATUSES, RowResult

MARK = {"reproduced": "ok", "outside": "**OUTSIDE**", "incomplete": "not measured", "server": "server",
        "skipped": "skipped"}


def build_report(reg: Registry, table: str, results: Sequence[RowResult], device: str) -> dict[str, Any]:
    """The JSON report of one `run`: header, the registry it read, a count per status, every row."""
    backbones = sorted({r.backbone for r in results if r.backbone})
    checkpoints = {r.row.id: r.checkpoint for r in results if r.checkpoint}
    benchmarks = sorted({r.row.benchmark for r in results})
    splits = sorted({r.row.split for r in results})
    header = report_header(benchmark=",".join(benchmarks), split=",".join(splits), backbone=",".join(backbones),
                           checkpoints=checkpoints, device=device, registry=reg.path.name,
                           registry_kind=reg.kind, table=table)
    counts = Counter(r.status for r in results)
    return {"header": header, "summary": {s: counts.get(s, 0) for s in STATUSES},
            "tables": {k: {"paper": t.paper, "table": t.table} for k, t in reg.tables.items()
                       if any(r.row.table == k for r in results)},
            "rows": [r.to_json() for r in results]}


def fmt(v: float | None, decimals: int) -> str:
    return "—" if v is None else f"{v:.{decimals}f}"


def markdown(reg: Registry, report: dict[str, Any]) -> str:
    """The report as markdown: the header, a summary line, then one line per published metric
    (a skipped or server row: one line with its reason)."""
    h = report["header"]
    load = h["load"]
    vers = ", ".join(f"{k} {v}" for k, v in h["versions"].items() if v)
    lines = [f"# Reproduction: {h['table']} ({h['registry']}, {h['registry_kind']})", "",
             f"- commit `{h['commit']}`" + (" (uncommitted changes)" if h["dirty"] else "") + f", {h['date']}",
             f"- device {h['device']}; load {load['load_1m']} / {load['load_5m']} / {load['load_15m']} "
             f"on {load['cpus']} CPUs; {h['machine']['platform']}",
             f"- {vers}", f"- command: `{h['command']}`", "",
             "Summary: " + ", ".join(f"{n} {s}" for s, n in report["summary"].items() if n), "",
             "| row | method | data / split | metric | published | measured | Δ | tolerance | status |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in report["rows"]:
        row = next(x for x in reg.rows if x.id == r["id"])
        d = reg.tables[row.table].decimals
        tol = f"±{reg.tolerances[row.tolerance].points:g}"
        where = f"{r['data']} / {r['split']}"
        method = r["method"] + (f" (chord λ {r['lambda_used']:g})" if r["scoring"] == "chord" and
                                r["lambda_used"] is not None else "")
        if not r["compared"]:
            lines.append(f"| `{r['id']}` | {method} | {where} | | | | | {tol} | {MARK[r['status']]}: "
                         f"{r['reason'].replace('|', '/')} |")
            continue
        for c in r["compared"]:
            mark = "ok" if c["within"] else MARK["outside"] if c["within"] is False else MARK["incomplete"]
            lines.append(f"| `{r['id']}` | {method} | {where} | {c['metric']} | {fmt(c['published'], d)} | "
                         f"{fmt(c['measured'], d + 2)} | {fmt(c['delta'], d + 2)} | {tol} | {mark} |")
    return "\n".join(lines) + "\n"
