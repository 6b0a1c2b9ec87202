"""Acknowledged judgments survive the file system failing under the annotation DB.

`db.serve` (the db layer's write path: one transaction per judgment, the reply sent after the
commit) writes a SQLite file on a loop-mounted ext4 (`errors=remount-ro`); client threads POST
judgments. When `--fault-at` of them are acknowledged, ext4 is made to fail through the kernel's
own hook (`/sys/fs/ext4/<dev>/trigger_fs_error`, what a disk error does): the journal aborts,
the file system turns read-only, and every page that had not reached the device is dropped when
it is unmounted — what an OS crash or a power cut does to the same pages. The clients go on until
their first failed write, the server gets SIGKILL, the image is checked (`e2fsck -fy`, which
replays the journal) and mounted again, and every acknowledged write is looked for.

    sudo .venv/bin/python bench/fault_annotation.py [--synchronous FULL|NORMAL] [--clients 8]
        [--per-client 30] [--fault-at 0.5] [--runs 1] [--out FILE]

`--synchronous NORMAL` is the control: SQLite then fsyncs only at checkpoints, and the
acknowledged writes since the last one are lost (the run FAILs, which shows the fault is real).
Needs Linux, root, a free loop device, losetup, mkfs.ext4, e2fsck and ext4's sysfs hook;
`unavailable()` says what is missing. Exits 1 unless nothing acknowledged was lost or stale.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, no install needed
from db.stress import Ack, ServerProcess, free_port, plan_writes, request, seed_db  # noqa: E402
from db.stress_verify import Verification, verify  # noqa: E402

TOOLS = ("losetup", "mkfs.ext4", "e2fsck", "mount", "umount")


def unavailable() -> str | None:
    """Why a loop-mounted ext4 cannot be made here (None: it can)."""
    if sys.platform != "linux":
        return "not Linux"
    if os.geteuid() != 0:
        return "needs root (losetup and mount)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"missing tools: {', '.join(missing)}"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control (no loop devices)"
    if "ext4" not in Path("/proc/filesystems").read_text():
        return "the kernel has no ext4"
    return None


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


class LoopFS:
    """An ext4 image in a file, attached to a loop device and mounted with errors=remount-ro."""

    def __init__(self, work: Path, size_mb: int = 64):
        self.image, self.mnt = work / "fs.img", work / "mnt"
        self.size_mb = size_mb
        self.loop: str | None = None
        self.fsck_rc: int | None = None

    def create(self) -> None:
        with open(self.image, "wb") as f:
            f.truncate(self.size_mb << 20)
        r = _run("mkfs.ext4", "-q", "-F", str(self.image))
        if r.returncode:
            raise RuntimeError(f"mkfs.ext4: {r.stderr}")
        self.mnt.mkdir(exist_ok=True)
        self._attach()

    def _attach(self) -> None:
        r = _run("losetup", "-f", "--show", str(self.image))
        if r.returncode:
            raise RuntimeError(f"losetup: {r.stderr.strip()}")
        self.loop = r.stdout.strip()
        r = _run("mount", "-o", "errors=remount-ro", self.loop, str(self.mnt))
        if r.returncode:
            self._detach()
            raise RuntimeError(f"mount {self.loop}: {r.stderr.strip()}")

    def _detach(self) -> None:
        if self.loop is not None:
            _run("losetup", "-d", self.loop)
            self.loop = None

    @property
    def hook(self) -> Path:
        assert self.loop is not None
        return Path("/sys/fs/ext4") / Path(self.loop).name / "trigger_fs_error"

    def fail(self) -> None:
        """The file system errors out now (the kernel logs 'EXT4-fs error ... test fault')."""
        self.hook.write_text("bench/fault_annotation.py test fault\n")

    def remount(self) -> None:
        """Unmount (the pages never written are dropped), check the image, mount it again."""
        r = _run("umount", str(self.mnt))
        if r.returncode:
            raise RuntimeError(f"umount {self.mnt}: {r.stderr.strip()}")
        self._detach()
        # 0: clean, 1: errors fixed; the injected error marks the file system as needing a check.
        self.fsck_rc = _run("e2fsck", "-fy", str(self.image)).returncode
        self._attach()

    def close(self) -> None:
        if self.loop is not None:
            if _run("umount", str(self.mnt)).returncode:
                _run("umount", "-l", str(self.mnt))
            self._detach()


@contextmanager
def loop_fs(work: Path) -> Iterator[LoopFS]:
    fs = LoopFS(work)
    fs.create()
    try:
        if not fs.hook.exists():
            raise RuntimeError(f"this kernel has no {fs.hook} (ext4's error hook)")
        yield fs
    finally:
        fs.close()


@dataclass
class FaultRun:
    synchronous: str
    planned: int = 0
    acks: list[Ack] = field(default_factory=list)
    acked_at_fault: int | None = None
    t_fault: float | None = None       # when the injection began (monotonic)
    fault_s: float = 0.0               # how long ext4 took to abort (the write to its hook)
    acked_after_fault: int = 0
    replies_after_fault: list[str] = field(default_factory=list)  # what the clients were told
    fsck_rc: int | None = None
    wall_s: float = 0.0
    verification: Verification | None = None


class _Clients:
    """Client threads: each POSTs its writes in order; the fault is injected inside the ack that
    reaches the threshold, so it lands at exactly that count with other requests in flight."""

    def __init__(self, run: FaultRun, threshold: int, fs: LoopFS, think_s: float):
        self.run, self.threshold, self.fs, self.think_s = run, threshold, fs, think_s
        self.lock = threading.Lock()
        self.faulted = threading.Event()

    def client(self, k: int, writes: list[dict[str, Any]], port: int) -> None:
        rng = random.Random(k)
        for p in writes:
            # A short pause between writes, so every client is mid-run when the fault lands.
            time.sleep(self.think_s * (0.5 + rng.random()))
            body = json.dumps(p).encode()
            t0 = time.monotonic()
            while True:
                faulted_before = self.faulted.is_set()
                try:
                    status, reply = request(port, "POST", "/judgment", body, timeout=30.0)
                except (OSError, http.client.HTTPException) as exc:
                    status, reply = None, str(exc).encode()
                if status == 200:
                    self._ack(Ack(p["annotator_id"], p["task_id"], p, time.monotonic(),
                                  time.monotonic() - t0, 0.0), faulted_before)
                    break
                if faulted_before:  # a write refused after the fault: this client is done
                    with self.lock:
                        self.run.replies_after_fault.append(f"{status}: {reply[:240].decode(errors='replace')}")
                    return
                time.sleep(0.02 * (0.5 + rng.random()))  # busy before the fault: retry

    def _ack(self, ack: Ack, after: bool) -> None:
        with self.lock:
            self.run.acks.append(ack)
            if after:
                self.run.acked_after_fault += 1
            if len(self.run.acks) == self.threshold and not self.faulted.is_set():
                self.run.t_fault = time.monotonic()
                self.fs.fail()
                self.run.fault_s = time.monotonic() - self.run.t_fault
                self.run.acked_at_fault = len(self.run.acks)
                self.faulted.set()


def run_fault(work: Path, synchronous: str = "FULL", clients: int = 8, per_client: int = 30,
              fault_at: float = 0.5, after_s: float = 10.0, think_s: float = 0.01) -> FaultRun:
    """One run on a fresh loop-mounted ext4 under `work` (see the module docstring)."""
    run = FaultRun(synchronous)
    t_start = time.monotonic()
    with loop_fs(work) as fs:
        db = fs.mnt / "ann.sqlite"
        people = seed_db(db, clients, per_client)
        rng = random.Random(0)
        plans = [plan_writes(k, a, ts, 0, rng) for k, (a, ts) in enumerate(people)]
        run.planned = sum(map(len, plans))
        server = ServerProcess(db, free_port(), work / "server.log", ("--synchronous", synchronous))
        server.start()
        cl = _Clients(run, max(1, int(fault_at * run.planned)), fs, think_s)
        threads = [threading.Thread(target=cl.client, args=(k, w, server.port), daemon=True)
                   for k, w in enumerate(plans)]
        try:
            for th in threads:
                th.start()
            deadline = time.monotonic() + 300
            while not cl.faulted.wait(0.05) and time.monotonic() < deadline:
                if not any(th.is_alive() for th in threads):
                    break
            for th in threads:  # every client stops at its first refused write after the fault
                th.join(timeout=after_s)
        finally:
            if server.proc is not None and server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGKILL)
                server.wait_dead()
        fs.remount()
        run.fsck_rc = fs.fsck_rc
        run.verification = verify(db, run.acks)
    run.wall_s = time.monotonic() - t_start
    return run


def split_lost(run: FaultRun) -> tuple[list[Ack], list[Ack]]:
    """The lost acknowledged writes: those acknowledged before the fault began (the property:
    must be none) and those whose reply came after it (their commit was in flight)."""
    v = run.verification
    lost = set(v.lost) if v is not None else set()
    hit = [a for a in run.acks if (a.annotator_id, a.task_id) in lost]
    before = [a for a in hit if run.t_fault is None or a.t_ack < run.t_fault]
    return before, [a for a in hit if a not in before]


def passed(run: FaultRun) -> tuple[bool, list[str]]:
    """Nothing acknowledged before the fault began is lost, the file is intact."""
    v = run.verification
    why = []
    if run.acked_at_fault is None:
        why.append("the fault was never injected")
    if v is None:
        return False, why + ["not verified"]
    before, _ = split_lost(run)
    if before:
        why.append(f"{len(before)} writes acknowledged before the fault lost")
    if v.stale:
        why.append(f"{len(v.stale)} rows older than their last acknowledged value")
    if v.duplicated:
        why.append(f"{len(v.duplicated)} duplicated rows")
    if v.integrity != ["ok"]:
        why.append(f"integrity_check: {'; '.join(v.integrity[:3])}")
    return not why, why


def report(run: FaultRun) -> str:
    v = run.verification
    ok, why = passed(run)
    load = os.getloadavg()
    before, during = split_lost(run)
    n_before = sum(1 for a in run.acks if run.t_fault is None or a.t_ack < run.t_fault)
    lines = [
        f"Annotation DB under a file-system failure: db.serve on a loop-mounted ext4, "
        f"synchronous={run.synchronous}, ext4 error injected at {run.acked_at_fault} acknowledged writes",
        f"run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, kernel {platform.release()}, load avg {load[0]:.1f}",
        "",
        f"writes planned                    {run.planned} (each a new judgment)",
        f"acknowledged                      {len(run.acks)}: {n_before} before the fault began, "
        f"{len(run.acks) - n_before} after (their commit in flight while ext4 aborted, "
        f"{run.fault_s * 1000:.0f} ms)",
        f"e2fsck -fy exit status            {run.fsck_rc} (1: errors corrected)",
    ]
    if v is not None:
        lines += [
            f"rows found after the remount      {v.rows}",
            f"lost, acknowledged before fault   {len(before)}",
            f"lost, acknowledged during it      {len(during)}",
            f"stale / duplicated                {len(v.stale)} / {len(v.duplicated)}",
            f"integrity_check                   {'; '.join(v.integrity[:3])}",
        ]
    lines += [f"refused after the fault           {len(run.replies_after_fault)} writes, e.g. "
              f"{run.replies_after_fault[0] if run.replies_after_fault else 'none'}",
              f"wall time                         {run.wall_s:.1f} s",
              "RESULT: " + ("PASS" if ok else "FAIL: " + "; ".join(why))]
    return "\n".join(lines) + "\n"


def summary(runs: list[FaultRun]) -> str:
    """Several runs: per run and in total, what was acknowledged before / during the fault and lost."""
    lines = [f"{len(runs)} runs, synchronous={runs[0].synchronous} (one line per run: acknowledged "
             "before the fault / lost of them; acknowledged during it / lost of them)"]
    tot = [0, 0, 0, 0]
    for i, r in enumerate(runs, 1):
        before, during = split_lost(r)
        n_before = sum(1 for a in r.acks if r.t_fault is None or a.t_ack < r.t_fault)
        row = [n_before, len(before), len(r.acks) - n_before, len(during)]
        tot = [a + b for a, b in zip(tot, row)]
        lines.append(f"  run {i:2d}: {row[0]} / {row[1]} lost; {row[2]} / {row[3]} lost; "
                     f"{'PASS' if passed(r)[0] else 'FAIL'}")
    lines.append(f"total: {tot[0]} acknowledged before the fault, {tot[1]} lost; {tot[2]} acknowledged "
                 f"during it, {tot[3]} lost; {sum(passed(r)[0] for r in runs)}/{len(runs)} runs PASS")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--per-client", type=int, default=30)
    ap.add_argument("--fault-at", type=float, default=0.5)
    ap.add_argument("--runs", type=int, default=1, help="repeat on a fresh file system each time")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    why = unavailable()
    if why:
        print(f"cannot run here: {why}", file=sys.stderr)
        return 2
    runs = []
    for _ in tqdm(range(a.runs), desc="fault runs", disable=a.runs == 1):
        with tempfile.TemporaryDirectory(prefix="cir-fault-") as tmp:
            runs.append(run_fault(Path(tmp), a.synchronous, a.clients, a.per_client, a.fault_at))
    text = report(runs[-1]) if a.runs == 1 else report(runs[-1]) + "\n" + summary(runs)
    print(text, end="")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    return 0 if all(passed(r)[0] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
