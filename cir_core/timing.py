"""Where a request's time went: its own work, waiting behind other requests' work, and one-time
builds (a method loaded, CIReVL's caption bank, an index), so that a method's compose time is
its own and not another request's wait or a first use's build.

A request opens an `account()`; code that waits for someone else's work runs under
`charged("wait")`, a one-time build under `one_time_build(desc, total, unit)` (also a tracked
task: n/N and an ETA for the page, a tqdm line in the log, `cir_core.progress.tracked`). The
pipeline reads `charges()` before and after each stage and method and takes both apart.
Work run for a caller on another thread (the batch worker) is charged to that caller by the
queue: the time its call waited to start as "wait", the builds that ran in its batch as "build"
(`cir_core.batching.BatchQueue`). Nested charges count once, as the outermost kind.

`now()` reads `clock` (time.perf_counter), which tests replace to make time pass on demand.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

from .progress import Task, tracked

KINDS = ("wait", "build")
clock: Callable[[], float] = time.perf_counter


def now() -> float:
    """The accounting clock, in seconds."""
    return clock()


@dataclass
class Charges:
    """Seconds a request spent waiting behind other requests' work, and in one-time builds."""

    wait_s: float = 0.0
    build_s: float = 0.0

    def copy(self) -> "Charges":
        return Charges(self.wait_s, self.build_s)

    def since(self, before: "Charges") -> "Charges":
        return Charges(self.wait_s - before.wait_s, self.build_s - before.build_s)

    @property
    def total_s(self) -> float:
        return self.wait_s + self.build_s


_account: ContextVar[Charges | None] = ContextVar("cir_timing_account", default=None)
_charging: ContextVar[bool] = ContextVar("cir_timing_charging", default=False)


@contextmanager
def account() -> Iterator[Charges]:
    """The current context's account, opened here when none is (a request, a batch's run)."""
    mine = _account.get()
    if mine is not None:
        yield mine
        return
    mine = Charges()
    token = _account.set(mine)
    try:
        yield mine
    finally:
        _account.reset(token)


def charges() -> Charges:
    """A copy of the current account (zeros outside one)."""
    mine = _account.get()
    return Charges() if mine is None else mine.copy()


def charge(kind: str, seconds: float) -> None:
    """Add `seconds` of `kind` to the current account; nothing inside a charged block (already
    counted) or outside an account."""
    if kind not in KINDS:
        raise ValueError(f"unknown charge {kind!r}; expected one of {KINDS}")
    mine = _account.get()
    if mine is None or _charging.get() or seconds <= 0:
        return
    if kind == "wait":
        mine.wait_s += seconds
    else:
        mine.build_s += seconds


@contextmanager
def charged(kind: str) -> Iterator[None]:
    """The block's time charged as `kind` (unless an outer block is charged already)."""
    if _charging.get():
        yield
        return
    token = _charging.set(True)
    t0 = now()
    try:
        yield
    finally:
        _charging.reset(token)
        charge(kind, now() - t0)


@contextmanager
def one_time_build(desc: str, total: int | None = None, unit: str = "it") -> Iterator[Task]:
    """A build done once and kept (a method loaded, a caption bank embedded): charged as "build"
    and tracked for whoever waits for it (`cir_core.progress.tracked`)."""
    with tracked(desc, total, unit) as task, charged("build"):
        yield task
