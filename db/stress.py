"""Load/fault stress for the annotation DB: concurrent annotator clients POST judgments to a
`db.serve` process that is killed with SIGKILL mid-run and restarted on the same file.

`run_stress` drives the run and returns what the clients saw; `db.stress_verify.verify` then
compares the file with every acknowledged write. bench/stress_annotation.py is the CLI.
"""
from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cir_core.progress import bar as progress_bar
from db.migrate import init_db
from db.models import EDIT_VALUES, IDENTITY_VALUES, Annotator, Query, QuerySet, Task
from db.sqlite import open_db, session_factory

REPO = Path(__file__).resolve().parents[1]


@dataclass
class StressConfig:
    clients: int = 32
    per_client: int = 50          # tasks per client, each written once
    revisions: int = 10           # extra writes per client that change an earlier answer
    kill_at: float = 0.5          # SIGKILL the server once this fraction of writes is acked
    down_s: float = 1.0           # how long the server stays dead
    think_ms: float = 0.0         # pause between one client's writes (an annotator reading)
    write_timeout_s: float = 120.0
    seed: int = 0
    progress: bool = True


@dataclass
class Ack:
    annotator_id: int
    task_id: int
    payload: dict[str, Any]
    t_ack: float
    end_to_end_s: float           # first attempt to reply, retries and outage included
    attempt_s: float              # the successful HTTP round trip alone


@dataclass
class RunResult:
    acks: list[Ack] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # writes given up or rejected
    retries: int = 0
    retries_503: int = 0
    busy_replies: list[str] = field(default_factory=list)  # the first few 503 messages
    planned: int = 0
    wall_s: float = 0.0
    t_kill: float | None = None
    t_ready_again: float | None = None
    acked_at_kill: int = 0
    server_log: str = ""


def seed_db(path: Path | str, clients: int, per_client: int) -> list[tuple[int, list[int]]]:
    """A fresh migrated DB with one annotator and `per_client` tasks per client."""
    engine = open_db(path)
    init_db(engine)
    with session_factory(engine)() as s:
        qs = QuerySet(name="stress", source="stress")
        people = []
        for k in range(clients):
            q = Query(query_set=qs, external_id=f"q{k}", reference_id=f"ref{k}", edit_text="edit")
            tasks = [Task(query=q, item_id=f"item{k}-{i}") for i in range(per_client)]
            ann = Annotator(name=f"stress-{k}")
            s.add_all([q, ann, *tasks])
            people.append((ann, tasks))
        s.commit()
        out = [(a.id, [t.id for t in ts]) for a, ts in people]
    engine.dispose()
    return out


def plan_writes(k: int, annotator_id: int, task_ids: list[int], revisions: int,
                rng: random.Random) -> list[dict[str, Any]]:
    """Each task once in random order, then `revisions` changes to earlier ones; every
    payload's comment is unique, so a stale stored value is always detectable."""
    order = task_ids[:]
    rng.shuffle(order)
    order += [rng.choice(task_ids) for _ in range(revisions)]
    writes = []
    for i, task_id in enumerate(order):
        p: dict[str, Any] = {"annotator_id": annotator_id, "task_id": task_id,
                             "comment": f"client {k} write {i}",
                             "time_spent_ms": rng.randint(100, 5000), "shown_position": i + 1}
        if rng.random() < 0.15:
            p.update(identity=None, edit=None, skip_reason=f"stress skip {k}-{i}")
        else:
            p.update(identity=rng.choice(IDENTITY_VALUES), edit=rng.choice(EDIT_VALUES))
        writes.append(p)
    return writes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m db.serve` as a child process, output appended to a log file."""

    def __init__(self, db: Path | str, port: int, log: Path, args: tuple[str, ...] = ()) -> None:
        self.db, self.port, self.log, self.args = db, port, log, tuple(args)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "db.serve", "--db", str(self.db), "--port", str(self.port),
                 *self.args], cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"db.serve exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                status, body = request(self.port, "GET", "/health", None, timeout=2.0)
                # The pid check: never mistake another process on this port for ours.
                if status == 200 and json.loads(body)["pid"] == self.proc.pid:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"db.serve not ready after {timeout_s} s:\n{self.tail()}")

    def wait_dead(self) -> int:
        """Reap the process (after someone sent it SIGKILL); returns its exit status."""
        assert self.proc is not None
        return self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, n: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def request(port: int, method: str, path: str, body: bytes | None,
            timeout: float) -> tuple[int, bytes]:
    """One HTTP request on a fresh connection: (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body, headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class _Shared:
    """State the client threads update; one lock, held only for counters."""

    def __init__(self, cfg: StressConfig, planned: int) -> None:
        self.lock = threading.Lock()
        self.result = RunResult(planned=planned)
        self.kill_threshold = max(1, int(cfg.kill_at * planned))
        self.kill_now = threading.Event()
        self.kill_pid: int | None = None
        self.bar = progress_bar(total=planned, desc="acked writes", disable=not cfg.progress, unit="w")

    def ack(self, a: Ack) -> None:
        with self.lock:
            self.result.acks.append(a)
            if len(self.result.acks) == self.kill_threshold and self.kill_pid is not None:
                # Killed right here, under the lock: the kill lands at exactly this count,
                # however busy the machine is, with the other clients' requests in flight.
                os.kill(self.kill_pid, signal.SIGKILL)
                self.result.acked_at_kill = len(self.result.acks)
                self.result.t_kill = time.monotonic()
                self.kill_now.set()
            self.bar.update(1)

    def retried(self, busy_reply: bytes | None) -> None:
        with self.lock:
            self.result.retries += 1
            if busy_reply is not None:
                self.result.retries_503 += 1
                if len(self.result.busy_replies) < 3:
                    self.result.busy_replies.append(busy_reply[:300].decode(errors="replace"))


def _client(k: int, writes: list[dict[str, Any]], port: int, cfg: StressConfig,
            shared: _Shared) -> None:
    rng = random.Random(cfg.seed * 1000 + k)
    for p in writes:
        body = json.dumps(p).encode()
        t0 = time.monotonic()
        n = 0
        while True:
            if time.monotonic() - t0 > cfg.write_timeout_s:
                with shared.lock:
                    shared.result.failures.append(f"client {k}: gave up on {p['comment']}")
                break
            t_try = time.monotonic()
            try:
                # The same payload every time: upsert_judgment makes a repeat an update.
                status, reply = request(port, "POST", "/judgment", body, timeout=30.0)
            except (OSError, http.client.HTTPException):
                status, reply = None, b""
            if status == 200:
                now = time.monotonic()
                shared.ack(Ack(p["annotator_id"], p["task_id"], p, now, now - t0, now - t_try))
                break
            if status not in (None, 503):
                with shared.lock:
                    shared.result.failures.append(f"client {k}: HTTP {status} {reply[:200]!r}")
                break
            shared.retried(reply if status == 503 else None)
            n += 1
            time.sleep(min(0.05 * 2 ** min(n, 4), 0.5) * (0.5 + rng.random()))
        if cfg.think_ms:
            time.sleep(cfg.think_ms / 1000 * (0.5 + rng.random()))


def run_stress(cfg: StressConfig, db: Path | str, port: int | None = None,
               log: Path | None = None) -> RunResult:
    """Seed `db` (a new SQLite file, or an empty database's URL), start the server, run the
    clients, kill -9 and restart it once mid-run. The server's output goes to `log` (default:
    beside a SQLite file)."""
    people = seed_db(db, cfg.clients, cfg.per_client)
    rng = random.Random(cfg.seed)
    plans = [plan_writes(k, a, ts, cfg.revisions, rng) for k, (a, ts) in enumerate(people)]
    shared = _Shared(cfg, sum(map(len, plans)))
    if log is None:
        log = Path(db).with_suffix(".server.log") if "://" not in str(db) else \
            Path(tempfile.mkdtemp(prefix="cir-stress-")) / "server.log"
    server = ServerProcess(db, port or free_port(), log)
    server.start()
    shared.kill_pid = server.proc.pid
    threads = [threading.Thread(target=_client, args=(k, w, server.port, cfg, shared), daemon=True)
               for k, w in enumerate(plans)]
    res = shared.result
    t_start = time.monotonic()
    try:
        for th in threads:
            th.start()
        while not shared.kill_now.wait(0.05):
            if not any(th.is_alive() for th in threads):
                break
        if shared.kill_now.is_set():
            if server.wait_dead() != -signal.SIGKILL:
                raise RuntimeError(f"db.serve did not die by SIGKILL:\n{server.tail()}")
            time.sleep(cfg.down_s)
            server.start()
            res.t_ready_again = time.monotonic()
        for th in threads:
            th.join()
        res.wall_s = time.monotonic() - t_start
    finally:
        shared.bar.close()
        server.stop()
        res.server_log = server.tail()
    return res
