"""Run registered rows through the evaluation loop and compare with the published values.

Rows are grouped so that each backbone loads once and each (backbone, dataset, split,
preprocessing, subset) gallery is embedded once (`cir_core.eval.loop.embed_benchmark`, through the
embedding cache); the rows of a group that share a method, checkpoint and protocol compose their
queries once and are scored under each row's option (`score_method`). A row whose inputs are
missing is skipped with the reason; a test split without ground truth gets its server file
written; every measured row is compared metric by metric, and one outside its tolerance is marked.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cir_core.errors import CIRError

from .needs import Sources, backbone_spec, check
from .registry import Registry, Row

if TYPE_CHECKING:
    from cir_core.benchmarks.common import Benchmark, Embedded
    from cir_core.encoder import Encoder

STATUSES = ("reproduced", "outside", "incomplete", "server", "skipped")


@dataclass
class RowResult:
    row: Row
    status: str  # one of STATUSES
    reason: str = ""
    measured: dict[str, float] = field(default_factory=dict)  # percent, every metric measured (derived too)
    compared: list[dict[str, Any]] = field(default_factory=list)  # one per published metric
    protocol: str = ""  # the evaluator's protocol line
    backbone: str = ""  # the loaded backbone's id
    checkpoint: str | None = None
    lam: float | None = None  # the λ Chord ran with
    files: list[str] = field(default_factory=list)  # submission files written

    def to_json(self) -> dict[str, Any]:
        r = self.row
        return {"id": r.id, "table": r.table, "label": r.label, "method": r.method, "benchmark": r.benchmark,
                "data": r.data, "split": r.split, "protocol": r.protocol, "preprocess": r.preprocess,
                "subset": r.subset, "scoring": r.scoring, "lambda": r.lam, "lambda_used": self.lam,
                "status": self.status, "reason": self.reason, "compared": self.compared,
                "measured": {k: round(v, 6) for k, v in self.measured.items()},
                "protocol_line": self.protocol, "backbone_id": self.backbone, "checkpoint_dir": self.checkpoint,
                "files": self.files}


def within(reg: Registry, row: Row, published: float, measured: float) -> bool:
    """|measured − published| ≤ the row's tolerance + half a unit of the printed last digit (a
    published 23.90 is any value that rounds to it)."""
    tol = reg.tolerances[row.tolerance].points + 0.5 * 10 ** -reg.tables[row.table].decimals
    return abs(measured - published) <= tol + 1e-9


def judge(reg: Registry, row: Row, measured: dict[str, float]) -> tuple[str, list[dict[str, Any]]]:
    """The row's status and its per-metric comparison: reproduced (every published metric within
    tolerance), outside (one is not), incomplete (one was not measured, the rest within)."""
    decimals = reg.tables[row.table].decimals
    rows, outside, missing = [], False, False
    for metric, pub in row.values.items():
        got = measured.get(metric)
        ok = got is not None and within(reg, row, pub, got)
        outside |= got is not None and not ok
        missing |= got is None
        rows.append({"metric": metric, "published": pub,
                     "measured": None if got is None else round(got, decimals + 2),
                     "delta": None if got is None else round(got - pub, decimals + 2),
                     "within": ok if got is not None else None})
    return ("outside" if outside else "incomplete" if missing else "reproduced"), rows


def percent(reg: Registry, benchmark: str, metrics: dict[str, float]) -> dict[str, float]:
    """An evaluator's fractions as percent, with the registry's derived metrics (a mean of measured
    ones, present only when every one it averages was measured)."""
    out = {k: 100.0 * float(v) for k, v in metrics.items()}
    for name, src in reg.derived.get(benchmark, {}).items():
        if all(s in out for s in src):
            out[name] = sum(out[s] for s in src) / len(src)
    return out


def safe_name(row_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", row_id)


def run_rows(reg: Registry, rows: Sequence[Row], sources: Sources, cache: Path | None = None,
             out: Path | None = None, progress: bool = True) -> list[RowResult]:
    """Every row of `rows` run (or skipped, with the reason), in `rows`' order."""
    results: dict[str, RowResult] = {}
    by_backbone: dict[str, list[Row]] = {}
    for row in rows:
        missing = [n for n in check(reg, row, sources) if n.blocking and n.ok is False]
        if missing:
            results[row.id] = RowResult(row, "skipped", "; ".join(n.text for n in missing))
        else:
            by_backbone.setdefault(row.backbone, []).append(row)
    for key, brows in by_backbone.items():
        results.update(run_backbone(reg, key, brows, sources, cache, out, progress))
    return [results[r.id] for r in rows]


def run_backbone(reg: Registry, key: str, rows: list[Row], sources: Sources, cache: Path | None,
                 out: Path | None, progress: bool) -> dict[str, RowResult]:
    from cir_core.backbone import load_backbone

    bb = reg.backbones[key]
    try:
        backbone = load_backbone(backbone_spec(bb), bb.pretrained, device=sources.device)
    except CIRError as e:
        return {r.id: RowResult(r, "skipped", f"backbone {bb.model} {bb.pretrained}: {e}") for r in rows}
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        groups.setdefault((r.data, r.split, r.preprocess, r.subset), []).append(r)
    results: dict[str, RowResult] = {}
    for grows in groups.values():
        results.update(run_gallery(reg, grows, backbone, sources, cache, out, progress))
    return results


def load_bench(row: Row, sources: Sources, protocol: str | None) -> Benchmark:
    from cir_core.benchmarks import load_benchmark

    return load_benchmark(row.benchmark, sources.data_dir(row.data), row.split, protocol=protocol,
                          subset=row.subset, preprocess=row.preprocess)


def run_gallery(reg: Registry, rows: list[Row], backbone: Encoder, sources: Sources, cache: Path | None,
                out: Path | None, progress: bool) -> dict[str, RowResult]:
    """The rows of one (dataset, split, preprocessing, subset): the galleries embedded once, then
    each protocol's benchmark scored with it."""
    from cir_core.eval.loop import embed_benchmark

    first = rows[0]
    try:
        bench = load_bench(first, sources, first.protocol)
        data = embed_benchmark(bench, backbone, cache, progress)
    except CIRError as e:
        return {r.id: RowResult(r, "skipped", f"{first.data}: {e}") for r in rows}
    shape = {k: len(g) for k, g in bench.galleries().items()}
    results: dict[str, RowResult] = {}
    by_protocol: dict[str | None, list[Row]] = {}
    for r in rows:
        by_protocol.setdefault(r.protocol, []).append(r)
    for protocol, prows in by_protocol.items():
        try:
            b = bench if protocol == first.protocol else load_bench(first, sources, protocol)
        except CIRError as e:
            results.update({r.id: RowResult(r, "skipped", f"{first.data}: {e}") for r in prows})
            continue
        if {k: len(g) for k, g in b.galleries().items()} != shape:  # protocols change texts, not galleries
            results.update({r.id: RowResult(r, "skipped", f"{first.data}: protocol {protocol} loads other "
                                            "galleries than the embedded ones") for r in prows})
            continue
        results.update(score_rows(reg, prows, b, data, backbone, sources, out))
    return results


def score_rows(reg: Registry, rows: list[Row], bench: Benchmark, data: Embedded, backbone: Encoder, sources: Sources,
               out: Path | None) -> dict[str, RowResult]:
    """Rows of one benchmark and protocol: each (method, checkpoint) composes once."""
    from cir_core.eval.loop import protocol_line, score_method
    from cir_core.methods.factory import create_method
    from cir_core.search.scoring import ScoreOpts

    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.method, r.checkpoint), []).append(r)
    line, results = protocol_line(bench), {}
    for (name, ck_key), mrows in groups.items():
        folder = sources.checkpoint_dir(reg.checkpoints[ck_key])
        try:
            method = create_method(name, backbone, folder)
        except CIRError as e:
            results.update({r.id: RowResult(r, "skipped", f"{name}: {e}") for r in mrows})
            continue
        opts = [ScoreOpts(r.scoring, r.lam) for r in mrows]
        try:
            scored, _ = score_method(bench, method, data, opts)
        except CIRError as e:  # e.g. a method that needs what this benchmark cannot give it
            results.update({r.id: RowResult(r, "skipped", f"{name}: {e}") for r in mrows})
            continue
        for r, o, res in zip(mrows, opts, scored):
            rr = RowResult(r, "reproduced", protocol=line, backbone=backbone.id,
                           checkpoint=None if folder is None else str(folder), lam=o.lam_for(method))
            if not bench.labelled:
                write_server_file(reg, rr, bench, res, out)
            else:
                rr.measured = percent(reg, r.benchmark, res.metrics)
                rr.status, rr.compared = judge(reg, r, rr.measured)
            results[r.id] = rr
    return results


def write_server_file(reg: Registry, rr: RowResult, bench: Any, res: Any, out: Path | None) -> None:
    """A split without ground truth (CIRR test1, CIRCO test): its server's file(s), and the row says
    where to score them."""
    server = reg.datasets[rr.row.data].server or "the benchmark's evaluation server"
    rr.status = "server"
    if out is None or not hasattr(bench, "write_submission"):
        rr.reason = f"no ground truth in {rr.row.split}: score it on {server} (run with --out to write the file)"
        return
    folder = out / "submissions"
    folder.mkdir(parents=True, exist_ok=True)
    rr.files = [str(p) for p in bench.write_submission(res, folder / f"{safe_name(rr.row.id)}.json")]
    rr.reason = f"no ground truth in {rr.row.split}: upload {', '.join(Path(f).name for f in rr.files)} at {server}"
