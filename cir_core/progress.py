"""tqdm bars for the command lines that stay readable in a log.

In a terminal `bar(...)` is a plain tqdm bar. When its output is not a terminal (a Space's or a
job's log, `cmd > log 2>&1`, CI) a bar would write a carriage-return redraw ten times a second,
which a log keeps as one endless line or thousands of lines; there it prints one plain line at
most every `CIR_PROGRESS_INTERVAL` seconds (default 30), ASCII, and its last state when it ends.
Jupyter's widget bars (tqdm.auto) are left as they are.

    for x in bar(items, desc="embedding", unit="image"): ...
    with bar(total=n, desc="shards") as b: b.update(k)

Long work that a person may be waiting for (a gallery embedded at start-up, a download, a
method's first-use build) runs as a `tracked` task: the same bar in the log, and listed by
`running()` with n/N and an ETA (`Task.line`), which the app shows in the page.

    with tracked("embedding films", total=n, unit="image") as task: ...; task.update(64)
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, TextIO

from . import env

DEFAULT_INTERVAL_S = 30.0


def interval_s() -> float:
    """Seconds between two lines of a bar in a log: `CIR_PROGRESS_INTERVAL`, else 30."""
    try:
        value = float(env.read("CIR_PROGRESS_INTERVAL") or DEFAULT_INTERVAL_S)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value >= 0 else DEFAULT_INTERVAL_S


class LogLines:
    """A file for tqdm's redraws that writes each one as a line of its own: no carriage
    returns, no padding, no blank lines (tqdm's clears and its closing newline)."""

    def __init__(self, fp: TextIO):
        self.fp = fp

    def write(self, s: str) -> int:
        line = s.replace("\r", "").rstrip()
        if line:
            self.fp.write(line + "\n")
        return len(s)

    def flush(self) -> None:
        flush = getattr(self.fp, "flush", None)
        if flush is not None:
            flush()


def is_terminal(fp: Any) -> bool:
    try:
        return bool(fp.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def bar(iterable: Iterable[Any] | None = None, **kwargs: Any) -> Any:
    """A tqdm bar (same arguments as `tqdm.auto.tqdm`) that writes plain lines, rarely, when its
    file (default stderr) is not a terminal."""
    from tqdm.auto import tqdm

    if tqdm.__module__.startswith("tqdm.notebook") or kwargs.get("disable") is True:
        return tqdm(iterable, **kwargs)
    fp = kwargs.pop("file", None) or sys.stderr
    if is_terminal(fp):
        return tqdm(iterable, file=fp, **kwargs)
    every = interval_s()
    kwargs.setdefault("mininterval", every)
    kwargs.setdefault("maxinterval", max(every, 10.0))
    kwargs.setdefault("ncols", 100)
    kwargs.setdefault("ascii", True)
    kwargs["dynamic_ncols"] = False  # a log has no width to follow
    return tqdm(iterable, file=LogLines(fp), **kwargs)


# -- long work a waiting page can show ---------------------------------------------------------------

QUIET_S = 1.0  # work that ends sooner leaves no line in the log


@dataclass(eq=False)
class Task:
    """One piece of long work in flight (a gallery embedded, a download, a first-use build),
    listed by `running()` so that whoever waits for it can say how far it is. `done` of `total`
    `unit`s (total None: unknown); `started` on `time.monotonic`. Unless `log` is False it writes
    tqdm's line to stderr: a live bar in a terminal; in a log, once it has run `QUIET_S`, then
    at most every `CIR_PROGRESS_INTERVAL` s, and when it ends."""

    desc: str
    total: int | None = None
    unit: str = "it"
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    log: bool = True
    _bar: Any = field(default=None, repr=False)
    _printed: float | None = field(default=None, repr=False)
    _printed_n: int = field(default=-1, repr=False)

    def __post_init__(self) -> None:
        if self.log and is_terminal(sys.stderr):
            self._bar = bar(total=self.total, desc=self.desc, unit=self.unit, delay=QUIET_S,
                            unit_scale=self.unit == "B")

    def update(self, n: int = 1) -> None:
        self.done += int(n)
        if self._bar is not None:
            self._bar.update(int(n))
        elif self.log and self.elapsed_s() >= QUIET_S and (
                self._printed is None or time.monotonic() - self._printed >= interval_s()):
            self._print()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.log and self.elapsed_s() >= QUIET_S and self._printed_n != self.done:
            self._print()

    def _print(self) -> None:
        from tqdm import tqdm

        self._printed, self._printed_n = time.monotonic(), self.done
        line = tqdm.format_meter(self.done, self.total, self.elapsed_s(), ncols=100, prefix=self.desc,
                                 unit=self.unit, ascii=True, unit_scale=self.unit == "B")
        print(line.rstrip(), file=sys.stderr, flush=True)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None until something is done or without a total."""
        if not self.total or self.done <= 0:
            return None
        return self.elapsed_s() * max(self.total - self.done, 0) / self.done

    def line(self) -> str:
        """'embedding films-test-104: 12,345/102,903 images · 01:20 elapsed · about 09:47 left'."""
        from tqdm import tqdm

        if self.unit == "B":  # bytes: '12.3MB/98.8MB'
            size = lambda n: tqdm.format_sizeof(n, "B", 1000)  # noqa: E731
            count = f"{size(self.done)}/{size(self.total)}" if self.total else size(self.done)
        else:
            count = f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}"
            count += " " + (self.unit if self.unit.endswith("s") else self.unit + "s")
        head = self.desc if not self.total and not self.done else f"{self.desc}: {count}"
        out = f"{head} · {tqdm.format_interval(self.elapsed_s())} elapsed"
        eta = self.eta_s()
        return out + (f" · about {tqdm.format_interval(eta)} left" if eta is not None else "")


_RUNNING: list[Task] = []
_RUNNING_LOCK = threading.Lock()


@contextmanager
def tracked(desc: str, total: int | None = None, unit: str = "it", log: bool = True) -> Iterator[Task]:
    """`desc`'s work as a `Task` listed by `running()` while the block runs (and, unless `log` is
    False, its tqdm line on stderr). Call `task.update(n)` as the work advances."""
    task = Task(desc, total, unit, log=log)
    _listed(task, True)
    try:
        yield task
    finally:
        _listed(task, False)
        task.close()


def _listed(task: Task, on: bool) -> None:
    with _RUNNING_LOCK:
        if on:
            _RUNNING.append(task)
        elif task in _RUNNING:
            _RUNNING.remove(task)


def tracked_tqdm() -> type:
    """A tqdm class (for a library's `tqdm_class=`, e.g. huggingface_hub's snapshot_download)
    whose bars are also listed by `running()` while they are open: the page can say how far a
    download the library runs is."""
    from tqdm.auto import tqdm

    class TrackedTqdm(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._cir_task = Task(str(self.desc or "downloading").rstrip(": "), self.total,
                                  str(self.unit or "it"), log=False)
            _listed(self._cir_task, True)

        def update(self, n: float | None = 1) -> bool | None:
            if n:
                self._cir_task.update(int(n))
            return super().update(n)

        def close(self) -> None:
            task = getattr(self, "_cir_task", None)  # close() can run from a failed __init__
            if task is not None:
                _listed(task, False)
            super().close()

    return TrackedTqdm


def running() -> list[Task]:
    """The tracked tasks in flight, oldest first."""
    with _RUNNING_LOCK:
        return list(_RUNNING)
