"""Annotation DB under load and a kill -9: concurrent annotators, a db.serve process killed
with SIGKILL mid-run and restarted on the same file; then every acknowledged write is checked.

    python bench/stress_annotation.py [--clients 32 --per-client 50 --revisions 10]
        [--kill-at 0.5 --down-s 1.0 --think-ms 0 --db FILE --out docs/results/stress_annotation.txt]

Exits 1 if an acknowledged write is lost or stale, a (annotator, task) has two rows, the
integrity check fails, a write was never acknowledged, or the kill did not land mid-run.
"""
from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
from db.stress import RunResult, StressConfig, run_stress  # noqa: E402
from db.stress_verify import Verification, verify  # noqa: E402


def _ms(values: list[float], q: float) -> str:
    return f"{np.percentile(np.asarray(values) * 1000, q):.1f} ms" if values else "n/a"


def passed(res: RunResult, v: Verification) -> tuple[bool, list[str]]:
    """Whether the run proves the property, and why not."""
    why = []
    if v.lost:
        why.append(f"{len(v.lost)} acknowledged writes lost")
    if v.duplicated:
        why.append(f"{len(v.duplicated)} (annotator, task) pairs with more than one row")
    if v.stale:
        why.append(f"{len(v.stale)} rows differ from their last acknowledged value")
    if v.integrity not in (["ok"], ["n/a"]) or v.fk_violations:
        why.append("integrity/foreign-key check failed")
    if v.unique_constraint != "held":
        why.append(f"unique constraint {v.unique_constraint}")
    if v.reapplied < 0:
        why.append("fewer audit rows than acknowledged revisions")
    if res.failures or len(res.acks) < res.planned:
        why.append(f"{res.planned - len(res.acks)} writes never acknowledged")
    if res.t_kill is None or not any(a.t_ack > res.t_kill for a in res.acks):
        why.append("the kill did not land mid-run (no write acknowledged after it)")
    return not why, why


def report(cfg: StressConfig, res: RunResult, v: Verification, db: str = "") -> str:
    """The human-readable result, as written to --out."""
    ok, why = passed(res, v)
    after = sum(a.t_ack > res.t_kill for a in res.acks) if res.t_kill is not None else 0
    outage = (res.t_ready_again - res.t_kill) if res.t_kill and res.t_ready_again else 0.0
    n = len(res.acks)
    lines = [
        f"Annotation DB stress: {cfg.clients} clients x ({cfg.per_client} tasks + {cfg.revisions} "
        f"revisions) via db.serve, SIGKILL at {cfg.kill_at:.0%} acknowledged",
        f"run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, python {platform.python_version()}, "
        f"{'PostgreSQL' if '://' in db else 'sqlite ' + sqlite3.sqlite_version}, "
        f"{os.cpu_count()} cores, "
        f"load avg {os.getloadavg()[0]:.1f}",
        f"config: clients={cfg.clients} per_client={cfg.per_client} revisions={cfg.revisions} "
        f"kill_at={cfg.kill_at} down_s={cfg.down_s} think_ms={cfg.think_ms} seed={cfg.seed}",
        "",
        f"writes planned                    {res.planned}",
        f"writes acknowledged (committed)   {n}",
        f"  acked before the kill           {res.acked_at_kill}",
        f"  acked after the kill            {after}",
        f"rows stored (judgments)           {v.rows}   (distinct acked (annotator, task): "
        f"{v.acked_keys}; rows never acked: {v.unacked_rows})",
        f"lost (acked, no row)              {len(v.lost)}",
        f"duplicated (>1 row per pair)      {len(v.duplicated)}",
        f"stale (row != last acked value)   {len(v.stale)}",
        f"unique (annotator, task)          {v.unique_constraint} "
        "(uq_judgment_annotator_task in the schema; a copied row was refused)",
        f"integrity_check (SQLite)          {'; '.join(v.integrity)}",
        f"foreign-key check                 {v.fk_violations} violations",
        f"retries                           {res.retries} ({res.retries - res.retries_503} "
        f"connection errors, {res.retries_503} HTTP 503 busy)",
        f"re-applied retries                {v.reapplied} (committed, reply lost to the kill, "
        "sent again: one extra audit row each, same values)",
        f"time_spent_ms inflated            {v.time_inflated_rows} rows, {v.time_inflated_ms} ms "
        "(the upsert adds time per write, so a re-applied retry counts twice)",
        f"audit rows                        {v.audits} (acked revisions: "
        f"{v.acked_writes - v.acked_keys})",
        f"outage                            {outage:.2f} s from SIGKILL to the restarted server "
        f"answering (down_s {cfg.down_s} + restart)",
        f"wall time                         {res.wall_s:.2f} s",
        f"throughput                        {n / res.wall_s:.1f} judgments/s overall; "
        f"{n / max(res.wall_s - outage, 1e-9):.1f} judgments/s excluding the outage",
        f"latency, acked write              p50 {_ms([a.end_to_end_s for a in res.acks], 50)}, "
        f"p95 {_ms([a.end_to_end_s for a in res.acks], 95)} (first attempt to reply, retries "
        "and outage included)",
        f"latency, successful request       p50 {_ms([a.attempt_s for a in res.acks], 50)}, "
        f"p95 {_ms([a.attempt_s for a in res.acks], 95)} (one POST: upsert + commit + reply)",
        f"failures                          {len(res.failures)}",
    ]
    lines += [f"  {f}" for f in res.failures[:10]] + [f"  {s}" for s in v.stale[:10]]
    lines += [f"  503 reply: {r}" for r in res.busy_replies]
    lines.append("RESULT: " + ("PASS" if ok else "FAIL: " + "; ".join(why)))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = StressConfig()
    ap.add_argument("--clients", type=int, default=d.clients)
    ap.add_argument("--per-client", type=int, default=d.per_client)
    ap.add_argument("--revisions", type=int, default=d.revisions)
    ap.add_argument("--kill-at", type=float, default=d.kill_at)
    ap.add_argument("--down-s", type=float, default=d.down_s)
    ap.add_argument("--think-ms", type=float, default=d.think_ms)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--port", type=int, default=None, help="default: a free port")
    ap.add_argument("--db", default=None, help="new SQLite file to create (kept), or the URL of an "
                    "empty PostgreSQL database; default: a temporary SQLite file")
    ap.add_argument("--out", type=Path, default=None, help="also write the report here")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    if a.clients < 1 or a.per_client < 1 or a.revisions < 0 or not 0 < a.kill_at < 1:
        ap.error("need clients >= 1, per-client >= 1, revisions >= 0, 0 < kill-at < 1")
    if a.db is not None and "://" not in a.db and Path(a.db).exists():
        ap.error(f"--db {a.db} exists; the stress run needs a new file (it never touches real data)")
    cfg = StressConfig(clients=a.clients, per_client=a.per_client, revisions=a.revisions,
                       kill_at=a.kill_at, down_s=a.down_s, think_ms=a.think_ms, seed=a.seed,
                       progress=not a.no_progress)
    with tempfile.TemporaryDirectory() as tmp:
        db = a.db if a.db and "://" in a.db else Path(a.db) if a.db else Path(tmp) / "stress.sqlite"
        res = run_stress(cfg, db, a.port, log=Path(tmp) / "server.log" if "://" in str(db) else None)
        v = verify(db, res.acks)
    text = report(cfg, res, v, str(db))
    print(text, end="")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    ok, _ = passed(res, v)
    if not ok:
        print(f"server log tail:\n{res.server_log}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
