"""Serving many requests at once: `BatchQueue` merges the tower work of concurrent requests into
one batch per kind of forward, run on one worker thread; `BatchedEncoder` sends a backbone's text
and image encodes through it; `Admission` bounds the requests in flight and answers the next one
with `Busy` ("N ahead of you") at once instead of letting it time out.

On a CPU a batch of 16 short texts costs little more than one (one forward reads the tower's
weights once and the per-layer overhead is paid once), so 16 visitors typing at once share their
forwards. A request waits for company only while more requests are in flight than have joined its
batch, and never longer than `max_wait_s`: a lone visitor waits for nothing.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterator, Sequence

import numpy as np

from . import timing
from .encoder import Encoder
from .errors import CIRError

MAX_WAIT_S = 0.005
MAX_ITEMS = 64  # rows in one forward: a bigger batch only adds latency for the first in it


class Busy(CIRError):
    """Too many requests in flight; the message says how many are ahead."""

    def __init__(self, ahead: int):
        self.ahead = ahead
        super().__init__(f"The workbench is busy: {ahead} request{'s' * (ahead != 1)} ahead of yours. "
                         "Try again in a few seconds.")


class Admission:
    """At most `capacity` requests inside at once; the next gets `Busy` at once. Re-entrant: a
    thread already inside (an upload's encode, then its compare) counts once."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.active = 0
        self._lock = threading.Lock()
        self._depth = threading.local()

    @contextmanager
    def enter(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            with self._lock:
                if self.active >= self.capacity:
                    raise Busy(self.active)
                self.active += 1
        self._depth.n = depth + 1
        try:
            yield
        finally:
            self._depth.n = depth
            if depth == 0:
                with self._lock:
                    self.active -= 1


@dataclass(eq=False)
class _Ticket:
    fn: Callable[[list], Sequence[Any]]
    items: list
    arrived: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    result: list | None = None
    error: BaseException | None = None
    queued: float = field(default_factory=timing.now)  # the accounting clock's (`cir_core.timing`)
    started: float | None = None  # when the worker began the batch that holds it
    build_s: float = 0.0  # one-time builds that ran in its batch


@dataclass
class BatchStats:
    batches: int = 0
    tickets: int = 0
    items: int = 0
    largest: int = 0  # the most tickets (requests' calls) one batch served


class BatchQueue:
    """Calls to `run(lane, fn, items)` from many threads, merged per lane: the worker takes a lane's
    waiting calls (the lane whose oldest call is oldest), runs `fn` once on all their items, and
    hands each caller its own results. `fn(items) -> results` must treat items independently
    (row i of the output depends on item i only). `company()` tells how many callers may join (the
    requests in flight). A failed batch is re-run call by call, so one bad input fails only its
    own request. Each caller is charged (`cir_core.timing`) the time its call waited for the
    worker as "wait" and the one-time builds its batch ran as "build"."""

    def __init__(self, max_wait_s: float = MAX_WAIT_S, max_items: int = MAX_ITEMS,
                 company: Callable[[], int] | None = None):
        self.max_wait_s, self.max_items = float(max_wait_s), int(max_items)
        self.company = company or (lambda: 1)
        self.stats = BatchStats()
        self._lanes: dict[Hashable, deque[_Ticket]] = {}
        self._cv = threading.Condition()
        self._worker: threading.Thread | None = None

    def run(self, lane: Hashable, fn: Callable[[list], Sequence[Any]], items: Sequence[Any]) -> list:
        """`fn`'s results for `items`, computed in one batch with whatever other callers of `lane`
        are waiting; on the worker itself (a batch that calls back in) `fn` runs directly."""
        items = list(items)
        if not items:
            return []
        if threading.current_thread() is self._worker:
            return list(fn(items))
        ticket = _Ticket(fn, items)
        with self._cv:
            self._lanes.setdefault(lane, deque()).append(ticket)
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="cir-batch", daemon=True)
                self._worker.start()
            self._cv.notify_all()
        ticket.done.wait()
        timing.charge("wait", (ticket.started if ticket.started is not None else timing.now()) - ticket.queued)
        timing.charge("build", ticket.build_s)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None  # done without an error: the worker set it
        return ticket.result

    def pending(self) -> int:
        """Calls waiting for the worker (not the batch it runs now)."""
        with self._cv:
            return sum(len(q) for q in self._lanes.values())

    def _serve(self) -> None:
        while True:
            self._run(self._next())

    def _next(self) -> list[_Ticket]:
        """The next batch: the oldest lane's calls, once the wait is over (bounded)."""
        with self._cv:
            while not any(self._lanes.values()):
                self._cv.wait()
            lane = min((k for k, q in self._lanes.items() if q), key=lambda k: self._lanes[k][0].arrived)
            q = self._lanes[lane]
            deadline = q[0].arrived + self.max_wait_s
            while (len(q) < self.company() and sum(len(t.items) for t in q) < self.max_items
                   and time.monotonic() < deadline):
                self._cv.wait(max(0.0, deadline - time.monotonic()))
            batch = [q.popleft()]
            n = len(batch[0].items)
            while q and n + len(q[0].items) <= self.max_items:
                n += len(q[0].items)
                batch.append(q.popleft())
            return batch

    def _run(self, batch: list[_Ticket]) -> None:
        items = [x for t in batch for x in t.items]
        began = timing.now()
        for t in batch:
            t.started = began if t.started is None else t.started
        try:
            with timing.account() as spent:  # the builds this batch runs, handed to its callers
                try:
                    out = list(batch[0].fn(items))
                finally:
                    for t in batch:
                        t.build_s += spent.build_s
            if len(out) != len(items):
                raise RuntimeError(f"a batch of {len(items)} items gave {len(out)} results")
        except Exception as exc:  # noqa: BLE001 - handed to the caller(s), never lost
            if len(batch) == 1:
                batch[0].error = exc
            else:
                for t in batch:  # one bad input must fail only its own request
                    self._run([t])
                return
        else:
            start = 0
            for t in batch:
                t.result = out[start:start + len(t.items)]
                start += len(t.items)
        with self._cv:
            s = self.stats
            s.batches, s.tickets, s.items = s.batches + 1, s.tickets + len(batch), s.items + len(items)
            s.largest = max(s.largest, len(batch))
        for t in batch:
            t.done.set()


class BatchedEncoder:
    """A backbone whose `encode_texts` and `encode_images` go through a `BatchQueue` (lanes
    "texts" and "images"); every other attribute is the backbone's."""

    def __init__(self, backbone: Encoder, queue: BatchQueue):
        object.__setattr__(self, "_backbone", backbone)
        object.__setattr__(self, "_queue", queue)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backbone, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._backbone, name, value)

    def __repr__(self) -> str:
        return f"BatchedEncoder({self._backbone!r})"

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, int(self._backbone.dim)), np.float32)
        return np.stack(self._queue.run("texts", self._texts, texts)).astype(np.float32, copy=False)

    def _texts(self, texts: list[str]) -> list[np.ndarray]:
        unique = list(dict.fromkeys(texts))  # two visitors typing the same edit: encoded once
        emb = self._backbone.encode_texts(unique)
        at = {t: i for i, t in enumerate(unique)}
        return [emb[at[t]] for t in texts]

    def encode_images(self, images: Sequence[Any], batch_size: int = 64, progress: bool = False,
                      with_norms: bool = False) -> Any:
        rows = self._queue.run("images", self._images, list(images))
        emb = np.stack([e for e, _ in rows]).astype(np.float32, copy=False) if rows else \
            np.zeros((0, int(self._backbone.dim)), np.float32)
        norms = np.array([n for _, n in rows], np.float32)
        return (emb, norms) if with_norms else emb

    def _images(self, images: list[Any]) -> list[tuple[np.ndarray, float]]:
        emb, norms = self._backbone.encode_images(images, with_norms=True)
        return list(zip(emb, norms.tolist()))
