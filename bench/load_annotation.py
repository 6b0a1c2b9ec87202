"""Annotation under load through the real app: N signed-in gradio_client sessions drive
`python app.py --annotators ... --db ...` as annotators do, the app is killed with SIGKILL halfway
and restarted, then every acknowledged write is checked against the database.

    OMP_NUM_THREADS=1 .venv/bin/python bench/load_annotation.py \
        [--clients 32 --judgments 40 --think-s 2.0 --kill-at 0.5 --down-s 1.0 --queries 200 \
         --db FILE|URL --out load_annotation.txt --json clicks.json] [-- APP FLAGS]

Run it at normal priority (the app it starts must not be niced). The clients run at
--client-nice (0 by default: see bench/load_clients.py).

Each annotator is a session signed in with its own name (Gradio's login page) that calls the
Annotate tab's own events by name (`/annotate_next`, `/annotate_identity_*`, `/annotate_edit_*`,
`/annotate_skip`, `/annotate_back`) the way the page does (bench/load_clients.py: queue/join and
the event stream, over httpx), with a think time before every click (uniform in [0.5, 1.5] ×
--think-s). Per pair: one identity click and one edit click (the second saves and shows the next
pair); 8 % of pairs are skipped with a reason; after 8 % of answers the annotator presses Back,
checks that the previous pair shows its saved answer, and changes it. Every write carries a
unique comment, so a stale row is always detectable. All the annotators are asyncio tasks in one
process, so the clients are not what is measured: their CPU share is printed beside the figures,
with the machine's load average (sampled through the run) and `uptime` before and after.

When --kill-at of the planned first answers are acknowledged, the app process gets SIGKILL; it is
restarted on the same database --down-s seconds later. A client whose click fails signs in again
(the old session died with the process) and presses Next: the queue must show the pair it was on
(or the next one, if the lost reply's write had committed). The write in flight at the kill is
recorded as "unacknowledged": the check accepts it committed or not.

Then, against the DB: an acknowledged write with no row is lost; two rows for one (annotator,
task) are duplicated; a row whose values are not the last acknowledged write (nor a later
unacknowledged one) is stale; a row on a task outside its annotator's queue, or one no client
wrote, is misattributed; plus SQLite's integrity and foreign-key checks. Latency is the client's
wall time per click (submit to reply), p50/p95, over clicks answered in one attempt; the outage
is from SIGKILL to the first answered click after the restart. Exits 1 if the run does not prove
the property (anything lost/duplicated/stale/misattributed, a failed check, a resume at the wrong
pair) — latency is reported, not asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone, no install needed

from bench.load_check import Check, check_db  # noqa: E402
from bench.load_clients import SET, LoadConfig, Session, client_worker, event_indices  # noqa: E402

# -- the app process -------------------------------------------------------------------------------

def _cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc; 0 once it is gone."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """`python app.py` as a child process (its output appended to a log file)."""

    def __init__(self, db: str, users: Path, port: int, log: Path, extra: list[str]):
        self.db, self.users, self.port, self.log, self.extra = db, users, port, log, extra
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout_s: float = 900.0) -> None:
        # Gradio's monitoring summary (per-function processing times) refreshed every 200 events,
        # so the report can read the server's own measure at the end.
        env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
               "GRADIO_ANALYTICS_CACHE_FREQUENCY": "200"}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "app.py", "--annotators", str(self.users), "--db", self.db,
                 "--host", "127.0.0.1", "--port", str(self.port), *self.extra],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app.py exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url, timeout=15.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"app.py not answering after {timeout_s} s:\n{self.tail()}")

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


async def _first_click(url: str, user: tuple[str, str]) -> None:
    """One annotator's first Next: loads the engine, pools nothing (the set exists), warms up."""
    s = Session(url, await event_indices(url, user))
    try:
        await s.sign_in(*user)
        await s.call("annotate_next")
    finally:
        await s.close()


def pct(values: list[float], q: float) -> str:
    return f"{np.percentile(np.asarray(values), q) * 1000:.0f} ms" if values else "n/a"


def _server_times(url: str, user: tuple[str, str]) -> dict[str, Any]:
    """Gradio's own per-function processing times (from the start of the handler's processing to
    the reply being ready, queue wait excluded) since the app's last start: /monitoring/summary."""
    import httpx

    try:
        with httpx.Client(timeout=30) as c:
            c.post(url + "login", data={"username": user[0], "password": user[1]})
            r = c.get(url + "monitoring/summary")
            return r.json().get("functions", {}) if r.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}


def run(cfg: LoadConfig, db: str, work: Path, port: int | None) -> dict[str, Any]:
    users = [(f"ann{k:02d}", secrets.token_urlsafe(9)) for k in range(cfg.clients)]
    warm = ("warmup", secrets.token_urlsafe(9))
    users_file = work / "annotators.txt"
    users_file.write_text("".join(f"{n}:{p}\n" for n, p in [*users, warm]))
    # The benchmark's own set, large enough for every annotator (the demo set is 30 queries).
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "db.pooling", "--db", db, "--name", SET, "--queries",
                    str(cfg.queries), "--k", "5", "--overlap", str(cfg.overlap), "--gold", "0.1",
                    *cfg.app_args], cwd=REPO, check=True, capture_output=True)
    pool_s = time.monotonic() - t
    app = App(db, users_file, port or free_port(), work / "app.log", cfg.app_args)
    app.start()
    t = time.monotonic()
    asyncio.run(_first_click(app.url, warm))
    warm_s = time.monotonic() - t  # the first request loads the engine and the pictures' warm-up starts
    time.sleep(2.0)
    acked = mp.Value("i", 0)
    ctx = mp.get_context("fork")
    # Every annotator in one client process (asyncio): see bench/load_clients.py.
    procs = [ctx.Process(target=client_worker, args=(users, app.url, cfg, acked, str(work)), daemon=True)]
    planned = cfg.clients * cfg.judgments
    uptime0 = _uptime()
    t_start = time.monotonic()
    load0 = os.getloadavg()
    for p in procs:
        p.start()
    cpu0 = {"app": _cpu(app.proc.pid), "clients": sum(_cpu(p.pid) for p in procs)}
    t_kill = t_ready = None
    cpu_before_kill = cpu_clients_last = app_cpu_last = 0.0
    loads = []
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(0.05)
            if len(loads) < 100_000 and int(time.monotonic() * 20) % 100 == 0:
                loads.append(os.getloadavg()[0])
            if cfg.kill and t_kill is None and acked.value >= cfg.kill_at * planned:
                cpu_before_kill = _cpu(app.proc.pid) - cpu0["app"]
                app.kill9()
                t_kill = time.monotonic()
                cpu0["app"] = 0.0
                time.sleep(cfg.down_s)
                app.start()
                t_ready = time.monotonic()
            if any(p.is_alive() for p in procs):
                clients_cpu = sum(_cpu(p.pid) for p in procs if p.is_alive())
                if clients_cpu:
                    cpu_clients_last = clients_cpu - cpu0["clients"]
            app_cpu_last = _cpu(app.proc.pid) - cpu0["app"]
        wall = time.monotonic() - t_start
        uptime1 = _uptime()
        server = _server_times(app.url, warm)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        app.stop()
    recs = [json.loads(Path(work, f"client-{k}.json").read_text()) for k in range(cfg.clients)
            if Path(work, f"client-{k}.json").exists()]
    return {"recs": recs, "t_kill": t_kill, "t_ready": t_ready, "wall": wall, "pool_s": pool_s,
            "cpu_app_s": cpu_before_kill + app_cpu_last, "cpu_clients_s": cpu_clients_last,
            "server": server,
            "warm_s": warm_s, "planned": planned, "load_start": load0[0],
            "load_mean": float(np.mean(loads)) if loads else os.getloadavg()[0],
            "load_max": float(np.max(loads)) if loads else os.getloadavg()[0],
            "uptime_before": uptime0, "uptime_after": uptime1, "app_log": app.tail()}


def _server_lines(fns: dict[str, Any]) -> list[str]:
    """The app's own processing time per event kind (Gradio's monitoring, since the restart)."""
    kinds = {"first label or save": ("annotate_identity_", "annotate_edit_"), "skip": ("annotate_skip",),
             "back": ("annotate_back",), "next (resume)": ("annotate_next",)}
    def usable(v: dict) -> bool:  # Gradio holds None (NaN) percentiles for a function with no timings
        qs = (v.get("process_time_percentiles") or {})
        return bool(v.get("total_requests")) and all(isinstance(qs.get(q), (int, float)) and qs[q] == qs[q]
                                                     for q in ("50th", "90th", "99th"))

    out = []
    for label, prefixes in kinds.items():
        rows = [v for k, v in fns.items() if k and k.startswith(prefixes) and usable(v)]
        if not rows:
            continue
        n = sum(r["total_requests"] for r in rows)
        # Percentiles of several functions cannot be merged exactly: the request-weighted mean of
        # each function's percentile, and the worst one.
        p = {q: (sum(r["process_time_percentiles"][q] * r["total_requests"] for r in rows) / n,
                 max(r["process_time_percentiles"][q] for r in rows)) for q in ("50th", "90th", "99th")}
        out.append(f"  server-side, {label:21s} p50 {p['50th'][0] * 1000:.0f} ms, p90 {p['90th'][0] * 1000:.0f} ms, "
                   f"p99 {p['99th'][0] * 1000:.0f} ms (worst function p99 {p['99th'][1] * 1000:.0f} ms; {n} events)")
    if out:
        out.insert(0, "server-side processing (Gradio's own measure per event, handler start to reply, "
                      "queue wait and transfer excluded; since the restart):")
    return out


def report(cfg: LoadConfig, db: str, res: dict, chk: Check) -> tuple[str, bool]:
    recs, t_kill = res["recs"], res["t_kill"]
    clicks = [c for r in recs for c in r["clicks"]]
    after = [c for c in clicks if t_kill is not None and c[1] > t_kill]
    first_after = min((c[1] + c[2] for c in after), default=None)
    outage = (first_after - t_kill) if first_after and t_kill else None
    steady = [c for c in clicks if c[0] not in ("resume", "open")]
    lat = lambda kinds: [c[2] for c in steady if c[0] in kinds]  # noqa: E731
    all_clicks = lat(("first-label", "save", "skip", "back"))
    errors = [e for r in recs for e in r["errors"]]
    fatal = [e for e in errors if e[1] == "fatal"]
    sign_in_retries = [e for e in errors if e[1] == "connect"]
    unfinished = [r["name"] for r in recs if not r["finished"]]
    why = []
    for label, items in (("lost", chk.lost), ("duplicated", chk.duplicated), ("stale", chk.stale),
                         ("misattributed", chk.misattributed), ("Back showed a wrong answer", chk.read_back_wrong),
                         ("resumed at a wrong pair", chk.resumes_wrong), ("client errors", fatal),
                         ("unfinished clients", unfinished)):
        if items:
            why.append(f"{len(items)} {label}")
    if chk.integrity not in ("ok", "n/a") or chk.fk_violations:
        why.append("integrity/foreign-key check failed")
    if cfg.kill and (t_kill is None or not after):
        why.append("the kill did not land mid-run")
    ok = not why
    n_first = sum(1 for r in recs for a in r["acks"] if not a["revision"])
    n_rev = sum(1 for r in recs for a in r["acks"] if a["revision"])
    backend = "PostgreSQL" if "://" in db and db.startswith("postgres") else f"SQLite {sqlite3.sqlite_version}"
    lines = [
        f"Annotation under load through the real app: {cfg.clients} signed-in sessions x "
        f"{cfg.judgments} judgments, SIGKILL of app.py at {cfg.kill_at:.0%}",
        f"run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, python {platform.python_version()}, "
        f"{backend}, {os.cpu_count()} cores shared; load avg {res['load_start']:.1f} at start, "
        f"{res['load_mean']:.1f} mean and {res['load_max']:.1f} max during the run",
        f"uptime before: {res['uptime_before']}",
        f"uptime after:  {res['uptime_after']}",
        f"config: think {cfg.think_s} s mean per click (uniform x0.5-1.5), skip {cfg.p_skip:.0%}, "
        f"back+change {cfg.p_back:.0%}, set of {cfg.queries} queries (overlap {cfg.overlap}, 10 % gold), "
        f"clients: one process (asyncio, httpx) at nice {cfg.client_nice}, app args {cfg.app_args or 'none'}",
        "",
        f"writes acknowledged               {chk.acked} ({n_first} first answers/skips of {res['planned']} "
        f"planned, {n_rev} changed answers after Back)",
        f"rows stored (judgments)           {chk.rows}; audit rows {chk.audits}",
        f"lost (acked, no row)              {len(chk.lost)}",
        f"duplicated (>1 row per pair)      {len(chk.duplicated)}",
        f"stale (row != last acked value)   {len(chk.stale)}",
        f"misattributed                     {len(chk.misattributed)} (rows outside their annotator's "
        "queue, or written by no client)",
        f"committed, reply lost to the kill {chk.committed_unacked} (row holds the unacknowledged write: allowed)",
        f"Back showed the saved answer      {sum(len(r['read_back']) for r in recs) - len(chk.read_back_wrong)}"
        f"/{sum(len(r['read_back']) for r in recs)}",
        f"queues resumed at the right pair  {chk.resumes - len(chk.resumes_wrong)}/{chk.resumes}",
        f"integrity_check / FK violations   {chk.integrity} / {chk.fk_violations}",
        "",
        f"latency per click, p50 / p95      {pct(all_clicks, 50)} / {pct(all_clicks, 95)} "
        f"({len(all_clicks)} clicks answered in one attempt)",
        f"  first label (no DB)             {pct(lat(('first-label',)), 50)} / {pct(lat(('first-label',)), 95)}",
        f"  saving click (answer + next)    {pct(lat(('save',)), 50)} / {pct(lat(('save',)), 95)}",
        f"  skip                            {pct(lat(('skip',)), 50)} / {pct(lat(('skip',)), 95)}",
        f"  back                            {pct(lat(('back',)), 50)} / {pct(lat(('back',)), 95)}",
        f"  after the restart only          {pct([c[2] for c in after if c[0] not in ('resume',)], 50)} / "
        f"{pct([c[2] for c in after if c[0] not in ('resume',)], 95)}",
        *_server_lines(res.get("server") or {}),
        f"outage                            {outage:.1f} s from SIGKILL to the first answered click "
        f"(down {cfg.down_s} s + app start {res['t_ready'] - t_kill - cfg.down_s:.1f} s + sign-in and "
        "engine load)" if outage is not None else "outage                            n/a",
        f"failed clicks (the outage)        {len(errors) - len(fatal) - len(sign_in_retries)}"
        f"{f'; {len(sign_in_retries)} first sign-ins timed out and were retried' if sign_in_retries else ''}",
        f"wall time                         {res['wall']:.0f} s (pooling {res['pool_s']:.0f} s and the "
        f"first engine load {res['warm_s']:.0f} s before it)",
        f"CPU used                          app {res['cpu_app_s']:.0f} s "
        f"({res['cpu_app_s'] / res['wall']:.0%} of one core); the {cfg.clients} clients (one process) "
        f"{res['cpu_clients_s']:.1f} s ({res['cpu_clients_s'] / res['wall']:.1%} of one core)",
    ]
    for label, items in (("lost", chk.lost), ("stale", chk.stale), ("misattributed", chk.misattributed),
                         ("read-back", chk.read_back_wrong), ("resume", chk.resumes_wrong), ("fatal", fatal)):
        lines += [f"  {label}: {x}" for x in items[:5]]
    lines.append("RESULT: " + ("PASS" if ok else "FAIL: " + "; ".join(why)))
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = LoadConfig()
    for f in ("clients", "judgments", "queries", "overlap", "seed", "client_nice"):
        ap.add_argument(f"--{f.replace('_', '-')}", type=int, default=getattr(d, f))
    ap.add_argument("--no-kill", action="store_true", help="no SIGKILL (latency alone)")
    for f in ("think_s", "p_skip", "p_back", "kill_at", "down_s"):
        ap.add_argument(f"--{f.replace('_', '-')}", type=float, default=getattr(d, f))
    ap.add_argument("--db", default=None, help="a new SQLite file or a PostgreSQL URL (an empty "
                    "database); default: a temporary SQLite file")
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the report here")
    ap.add_argument("--json", type=Path, default=None, help="every click and write, for analysis")
    ap.add_argument("app_args", nargs="*", help="after --: extra flags for app.py and db.pooling "
                    "(e.g. -- --world-queries 200)")
    a = ap.parse_args(argv)
    cfg = LoadConfig(clients=a.clients, judgments=a.judgments, think_s=a.think_s, p_skip=a.p_skip,
                     p_back=a.p_back, kill_at=a.kill_at, down_s=a.down_s, queries=a.queries,
                     overlap=a.overlap, seed=a.seed, app_args=list(a.app_args),
                     client_nice=a.client_nice, kill=not a.no_kill)
    with tempfile.TemporaryDirectory(prefix="cir-load-") as tmp:
        work = Path(tmp)
        db = a.db or str(work / "load.sqlite")
        if "://" not in db and Path(db).exists():
            ap.error(f"--db {db} exists; the benchmark needs a new database")
        res = run(cfg, db, work, a.port)
        chk = check_db(db, res["recs"])
        if a.json:  # first: whatever the report does, the raw record of the run is kept
            a.json.write_text(json.dumps({"config": asdict(cfg), "check": asdict(chk),
                                          **{k: v for k, v in res.items() if k != "app_log"}}))
        text, ok = report(cfg, db, res, chk)
        if not ok:
            print(f"app log tail:\n{res['app_log']}", file=sys.stderr)
    print(text, end="")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
