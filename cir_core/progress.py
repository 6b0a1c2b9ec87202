"""tqdm bars for the command lines that stay readable in a log.

In a terminal `bar(...)` is a plain tqdm bar. When its output is not a terminal (a Space's or a
job's log, `cmd > log 2>&1`, CI) a bar would write a carriage-return redraw ten times a second,
which a log keeps as one endless line or thousands of lines; there it prints one plain line at
most every `CIR_PROGRESS_INTERVAL` seconds (default 30), ASCII, and its last state when it ends.
Jupyter's widget bars (tqdm.auto) are left as they are.

    for x in bar(items, desc="embedding", unit="image"): ...
    with bar(total=n, desc="shards") as b: b.update(k)
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, TextIO
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
