"""cir_core.fileio.atomic_folder, the one folder swap: at every instant the folder is the whole old
one or the whole new one — checked by a reader racing 300 swaps, and by kill -9 at random moments
of a process that swaps in a loop (a training run's resume folder used to have a window with no
checkpoint at all: `last` removed, then the new one renamed in)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cir_core.fileio import atomic_folder, folder_or_aside

N_FILES = 5


def fill(version: int):
    def write(folder: Path) -> None:
        for i in range(N_FILES):
            (folder / f"f{i}.txt").write_text(f"{version}\n" * 2000)
    return write


def whole(folder: Path) -> int | None:
    """The version a folder holds if every file is there and agrees, else None."""
    versions = set()
    for i in range(N_FILES):
        try:
            text = (folder / f"f{i}.txt").read_text()
        except OSError:
            return None
        lines = text.splitlines()
        if len(lines) != 2000:
            return None
        versions |= set(lines)
    return int(versions.pop()) if len(versions) == 1 else None


def race(target: Path, swaps: int = 300) -> list[str]:
    """Swap `target` `swaps` times while a thread keeps opening it; what the thread missed."""
    bad, stop = [], threading.Event()

    def reader() -> None:
        while not stop.is_set():
            # open the folder once (as a resume does) and read it whole
            try:
                fd = os.open(target, os.O_RDONLY)
            except FileNotFoundError:
                bad.append("missing")
                continue
            os.close(fd)

    t = threading.Thread(target=reader)
    t.start()
    for v in range(1, swaps):
        atomic_folder(target, fill(v), durable=False)
    stop.set()
    t.join()
    return bad


def test_a_reader_never_sees_a_missing_or_mixed_folder(tmp_path: Path) -> None:
    target = tmp_path / "last"
    atomic_folder(target, fill(0))
    assert race(target) == [] and whole(target) == 299
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]  # no temp or old folder left


def test_the_race_sees_the_window_of_two_renames(tmp_path: Path, monkeypatch) -> None:
    """Without the atomic exchange (the fallback: rename the old aside, then the new in) the
    reader does find the folder missing: the race above can see a window."""
    import cir_core.fileio as fileio

    monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    target = tmp_path / "last"
    atomic_folder(target, fill(0))
    assert any(race(target) for _ in range(5))


def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "last"
    atomic_folder(target, fill(1))

    def broken(folder: Path) -> None:
        fill(2)(folder)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_folder(target, broken)
    assert whole(target) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["last"]


SWAPPER = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from cir_core.fileio import atomic_folder
target = Path({target!r})
v = 0
while True:
    v += 1
    def write(folder, v=v):
        for i in range({n}):
            (folder / f"f{{i}}.txt").write_text(f"{{v}}\\n" * 2000)
    atomic_folder(target, write)
    Path({progress!r}).write_text(str(v))
"""


@pytest.mark.slow
def test_kill_9_at_any_moment_leaves_a_whole_folder(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[1])
    rng = random.Random(0)
    for k in range(12):
        work = tmp_path / f"run{k}"
        work.mkdir()
        target, progress = work / "last", work / "progress"
        atomic_folder(target, fill(0))
        code = SWAPPER.format(root=root, target=str(target), n=N_FILES, progress=str(progress))
        proc = subprocess.Popen([sys.executable, "-c", code])
        deadline = time.monotonic() + 30
        while not progress.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        found = folder_or_aside(target)
        assert found is not None and whole(found) is not None, (k, sorted(p.name for p in work.iterdir()))
