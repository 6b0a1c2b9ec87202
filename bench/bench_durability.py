"""What synchronous=FULL costs a click: the saving click's DB work (`AnnotationService.answer`:
the answer, the next claim and the progress in one transaction) on SQLite with FULL (the WAL
fsynced at every commit) and NORMAL (fsynced only at checkpoints), side by side in one process.

    .venv/bin/python bench/bench_durability.py [--rounds 7] [--clicks 60] [--threads 8]
        [--dir DIR] [--out FILE]

Each round times `--clicks` saves by one annotator on each setting, in ABBA order (FULL, NORMAL,
NORMAL, FULL, ...) so a drift in the machine's load falls on both; then `--threads` annotators
save at once, as fast as they can (the write lock is held through the fsync, so this is where
FULL's cost would pile up). Reported: per setting the median and p95 of the single-annotator
clicks, the per-round ratio FULL / NORMAL of the medians (median and range over rounds), the
added milliseconds, and the concurrent throughput. The DB files go in `--dir` (default: a
temporary folder on the disk that holds this clone, like the app's default annotations.sqlite).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone, no install needed

from db.faults import DBFault  # noqa: E402
from db.models import Query, QuerySet, Task  # noqa: E402
from db.service import AnnotationService  # noqa: E402

MODES = ("FULL", "NORMAL")
SET = "durability"



def fs_type(folder: str | Path) -> str:
    """The filesystem the DB is on (what fsync costs depends on it), not the folder's path."""
    try:
        out = subprocess.run(["df", "--output=fstype", str(folder)], capture_output=True, text=True, check=True)
        return out.stdout.split()[-1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "an unknown filesystem"

def make_service(path: Path, mode: str, n_tasks: int) -> AnnotationService:
    """A migrated DB holding one set of `n_tasks` tasks (20 per query), opened with `mode`."""
    svc = AnnotationService(path, synchronous=mode)
    with svc.Session() as s:
        qs = QuerySet(name=SET, source="bench", overlap=1, pool_k=5)
        for qi in range(0, n_tasks, 20):
            q = Query(query_set=qs, external_id=f"q{qi}", reference_id=f"ref{qi}", edit_text="edit")
            s.add_all([q, *(Task(query=q, item_id=f"item{qi + i}") for i in range(20))])
        s.commit()
    return svc


def _busy_retry(call, busy: list[int]):
    """`call()`, pressed again while the DB answers busy (what the annotator is told to do)."""
    while True:
        try:
            return call()
        except DBFault as exc:
            if exc.kind != "busy":
                raise
            busy[0] += 1


def clicks(svc: AnnotationService, user: str, n: int, busy: list[int] | None = None) -> list[float]:
    """`n` saving clicks by `user`: seconds per click (busy retries included, counted in `busy`)."""
    busy = busy if busy is not None else [0]
    st = _busy_retry(lambda: svc.open(user, SET), busy)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        st = _busy_retry(lambda st=st, i=i: svc.answer(user, SET, st.task.task_id, "yes", "partial",
                                                       comment=f"{user} {i}", time_spent_ms=1000), busy)
        out.append(time.perf_counter() - t0)
    return out


def concurrent(svc: AnnotationService, tag: str, threads: int, n: int) -> tuple[float, list[float], int]:
    """`threads` annotators saving `n` each at once: (saves per second, every click's seconds,
    clicks answered busy and pressed again)."""
    lat: list[list[float]] = [[] for _ in range(threads)]
    busy = [0]
    ths = [threading.Thread(target=lambda k=k: lat[k].extend(clicks(svc, f"{tag}-t{k}", n, busy)))
           for k in range(threads)]
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    wall = time.perf_counter() - t0
    return threads * n / wall, [x for xs in lat for x in xs], busy[0]


def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--clicks", type=int, default=60)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cir-durability-", dir=a.dir or REPO))
    uptime0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    n_tasks = (a.rounds * 2 + a.threads) * a.clicks + 40
    try:
        svcs = {m: make_service(work / f"{m.lower()}.sqlite", m, n_tasks) for m in MODES}
        single: dict[str, list[float]] = {m: [] for m in MODES}
        medians: dict[str, list[float]] = {m: [] for m in MODES}
        for r in tqdm(range(a.rounds), desc="rounds"):
            order = MODES if r % 2 == 0 else MODES[::-1]
            for m in (*order, *order[::-1]):
                lat = clicks(svcs[m], f"r{r}-{len(medians[m])}", a.clicks // 2)
                single[m] += lat
                medians[m].append(float(np.median(lat)))
        conc = {m: concurrent(svcs[m], "c", a.threads, a.clicks) for m in MODES}
        for svc in svcs.values():
            svc.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    uptime1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    # One ratio per round: the two FULL medians over the two NORMAL medians of that round.
    per_round = [np.median(medians["FULL"][2 * r:2 * r + 2]) / np.median(medians["NORMAL"][2 * r:2 * r + 2])
                 for r in range(a.rounds)]
    added = [np.median(medians["FULL"][2 * r:2 * r + 2]) - np.median(medians["NORMAL"][2 * r:2 * r + 2])
             for r in range(a.rounds)]
    lines = [
        "What synchronous=FULL costs the saving click (AnnotationService.answer: answer + next claim "
        "+ progress, one transaction), FULL vs NORMAL side by side",
        f"run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} cores shared, DB on {fs_type(a.dir or REPO)}",
        f"uptime before: {uptime0}",
        f"uptime after:  {uptime1}",
        f"config: {a.rounds} rounds x {a.clicks} clicks per setting (ABBA order), then "
        f"{a.threads} annotators at once x {a.clicks} clicks",
        "",
        "one annotator          median    p95       (all clicks of all rounds)",
    ]
    for m in MODES:
        lines.append(f"  {m:7s}              {ms(float(np.median(single[m]))):9s} "
                     f"{ms(float(np.percentile(single[m], 95)))}")
    lines += [
        f"ratio FULL / NORMAL    median {np.median(per_round):.2f}, range {min(per_round):.2f}-"
        f"{max(per_round):.2f} over {a.rounds} rounds (per-round medians)",
        f"added per click        median {ms(float(np.median(added)))}, range {ms(min(added))} to "
        f"{ms(max(added))}",
        f"{a.threads} annotators at once  saves/s   median    p95       busy (5 s wait, pressed again)",
    ]
    for m in MODES:
        rate, lat, busy = conc[m]
        lines.append(f"  {m:7s}              {rate:7.0f}   {ms(float(np.median(lat))):9s} "
                     f"{ms(float(np.percentile(lat, 95))):9s} {busy}")
    lines.append(f"throughput FULL / NORMAL  {conc['FULL'][0] / conc['NORMAL'][0]:.2f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
