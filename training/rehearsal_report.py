"""The two checks of `training/rehearse_real.sh` that are easier in Python than in bash.

    python -m training.rehearsal_report app --checkpoints SPEC --expect DIR [--out app-check.json]
    python -m training.rehearsal_report report --out OUT [--scale full] [--seed 0] [--native DIR]

`app` starts `python app.py --checkpoints SPEC` (a Hub repo id, or a folder remote when
CIR_LOCAL_HUB is set), asks its JSON API to compare one world query, and checks that every
method column answers with exactly the top-k the library computes from the checkpoints in DIR
(so the app really serves the pushed checkpoints, not the shipped ones). `report` puts the
rehearsal's evaluations beside the native ones: CIRR-format metrics, the world's identity@1, and
the ratio rehearsal / native that the issue's 90 % bar is judged on.
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("pact", "compose-only", "dice", "pace")
BAR = 0.9  # the rehearsal's PACT must reach this share of the native PACT's R@10 and identity@1
ROWS = (("cirr", "R@1"), ("cirr", "R@10"), ("cirr", "R@50"), ("cirr", "Rs@1"),
        ("world", "R@10"), ("world", "identity@1"), ("world", "edit@1"))


# -- the app -----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(proc: subprocess.Popen, port: int, timeout: float = 300.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"app.py exited with {proc.returncode}:\n{proc.stdout.read() if proc.stdout else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"app.py did not listen on port {port} within {timeout:.0f} s")


def expected_hits(expect: str, ref_id: str, edit: str, k: int) -> dict[str, list[str]]:
    """The top-k item ids of every column, computed by the library from the checkpoints in `expect`."""
    from cir_core.engine import load_engine
    from cir_core.settings import EngineConfig

    engine = load_engine(EngineConfig(checkpoints=expect, methods=COLUMNS))
    res = engine.compare(engine.reference(ref_id), edit, k=k)
    return {m.name: [h.item_id for h in m.hits] for m in res.methods}


def check_app(spec: str, expect: str, k: int = 5) -> dict[str, Any]:
    """Start the app on `spec`, compare one world query through its API, check every column."""
    from gradio_client import Client

    from cir_core.world import build_benchmark

    bench = build_benchmark("test", 1000)  # the app's default world gallery
    q = next(i for i, x in enumerate(bench.queries) if x.edit_type == "long")
    ref_id, edit = bench.items[bench.reference_idx[q]].item_id, bench.queries[q].text
    want = expected_hits(expect, ref_id, edit, k)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port),
                             "--checkpoints", spec, "--methods", ",".join(COLUMNS)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        _wait(proc, port)
        got = Client(f"http://127.0.0.1:{port}/", verbose=False).predict(
            reference_id=ref_id, edit=edit, k=k, scoring="cosine", api_name="/compare")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if "error" in got:
        raise SystemExit(f"the app refused the request: {got['error']}")
    cols = {m["name"]: m for m in got["methods"]}
    problems = [f"{n}: {cols[n]['error']}" if n in cols and cols[n]["error"] else
                f"{n}: top-{k} {[h['item_id'] for h in cols[n]['hits']]} != {want[n]}" if n in cols else
                f"{n}: no column" for n in COLUMNS
                if n not in cols or cols[n]["error"] or [h["item_id"] for h in cols[n]["hits"]] != want[n]]
    return {"checkpoints": spec, "expected_from": _shown(expect), "reference": ref_id, "edit": edit, "k": k,
            "columns": {n: [h["item_id"] for h in cols[n]["hits"]] for n in cols}, "problems": problems}


def _shown(path: str) -> str:
    """`path` as the report names it: relative to the repository when inside it (a reader's
    checkout has the same layout, not this machine's absolute paths), else its folder name."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else p.name


# -- the report --------------------------------------------------------------------------------
def _metric(report: dict, method: str, key: str) -> float | None:
    v = report.get("results", {}).get(method, {}).get("cosine", {}).get(key)
    return None if v is None else float(v)


def build_report(out: Path, scale: str, seed: int, native: str) -> dict[str, Any]:
    """Rehearsal vs native, per method and metric (cosine scoring), with the ratio."""
    evals = {(b, kind): json.loads((out / f"eval-{b}-{kind}.json").read_text())
             for b in ("cirr", "world") for kind in ("real", "native")}
    rows = []
    for m in (*COLUMNS, "sum"):
        for bench, key in ROWS:
            r, n = _metric(evals[bench, "real"], m, key), _metric(evals[bench, "native"], m, key)
            if r is None or n is None:
                continue
            rows.append({"method": m, "benchmark": bench, "metric": key, "rehearsal": r, "native": n,
                         "ratio": (r / n) if n else None})
    itt = [json.loads(x) for x in (out / "data" / "itt" / "itt.jsonl").read_text().splitlines() if x.strip()]
    types: dict[str, int] = {}
    for rec in itt:
        types[rec["edit_type"]] = types.get(rec["edit_type"], 0) + 1
    bar = {key: next((r["ratio"] for r in rows if r["method"] == "pact" and r["benchmark"] == "world"
                      and r["metric"] == key), None) for key in ("R@10", "identity@1")}
    return {"scale": scale, "seed": seed, "native_checkpoints": native, "date": time.strftime("%Y-%m-%d"),
            "itt_records": len(itt), "itt_edit_types": types, "rows": rows,
            "pact_bar": {k: {"ratio": v, "meets_90": v is not None and v >= BAR} for k, v in bar.items()},
            "app_check": json.loads((out / "app-check.json").read_text()) if (out / "app-check.json").is_file() else None}


def format_report(rep: dict) -> str:
    lines = [f"Rehearsal ({rep['scale']}, seed {rep['seed']}, {rep['date']}): ITT {rep['itt_records']} records "
             f"{rep['itt_edit_types']}; native = {rep['native_checkpoints']}", "",
             "| method | benchmark | metric | rehearsal | native | ratio |", "|---|---|---|---:|---:|---:|"]
    for r in rep["rows"]:
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['method']} | {r['benchmark']} | {r['metric']} | {100 * r['rehearsal']:.1f} "
                     f"| {100 * r['native']:.1f} | {ratio} |")
    for key, v in rep["pact_bar"].items():
        lines.append(f"\nPACT {key}: rehearsal/native = {v['ratio'] if v['ratio'] is None else round(v['ratio'], 3)}"
                     f" ({'meets' if v['meets_90'] else 'below'} the 90 % bar)")
    app = rep.get("app_check")
    if app:
        lines.append(f"\napp on {app['checkpoints']}: {'every column served the pushed checkpoints' if not app['problems'] else app['problems']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.rehearsal_report", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("app", help="check that app.py serves the checkpoints in --expect")
    a.add_argument("--checkpoints", required=True, help="what app.py gets as --checkpoints")
    a.add_argument("--expect", required=True, help="the folder of the same checkpoints")
    a.add_argument("--out", type=Path, help="write the check here (JSON)")
    r = sub.add_parser("report", help="rehearsal vs native, from OUT's eval-*.json")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--scale", default="full")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--native", default="")
    args = ap.parse_args(argv)
    if args.cmd == "app":
        res = check_app(args.checkpoints, args.expect)
        if args.out:
            args.out.write_text(json.dumps(res, indent=1) + "\n")
        print(json.dumps(res, indent=1))
        return 1 if res["problems"] else 0
    rep = build_report(args.out, args.scale, args.seed, args.native)
    (args.out / "report.json").write_text(json.dumps(rep, indent=1) + "\n")
    text = format_report(rep)
    (args.out / "report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
