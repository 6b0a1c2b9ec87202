"""`MethodSet`: the methods a request composes with, built lazily on the shared text memo, each
once (a failure is remembered and reported, not retried), and the q_∅ each method gave each
reference (it depends on the reference only, so trying several edits computes it once)."""
from __future__ import annotations

import logging
import threading
from typing import Sequence, cast

import numpy as np

from ..batching import BatchQueue
from ..checkpoint_source import CheckpointSource
from ..errors import CheckpointError, CIRError
from ..memo import LRU, TextMemo
from ..methods import Method, create_method, get_method_class, list_methods, method_label, split_baseline
from ..timing import charged, one_time_build
from .batched import BatchedMethod

log = logging.getLogger(__name__)
Q_EMPTY = 512  # (method, reference) q_∅ kept


class MethodSet:
    """The app's methods: `columns` shown side by side then `baseline`, built on `memo` (the
    backbone with remembered text encodes) from `checkpoints`."""

    def __init__(self, memo: TextMemo, checkpoints: CheckpointSource, names: Sequence[str],
                 queue: BatchQueue | None = None):
        """`queue`: batch the methods' compositions across concurrent requests (`BatchedMethod`)."""
        self.memo, self.checkpoints, self.queue = memo, checkpoints, queue
        columns, self.baseline = split_baseline(list(names))
        self.columns = tuple(columns)
        self._built: dict[str, Method | CIRError] = {}
        self._lock = threading.Lock()
        self._q_empty: LRU[tuple, np.ndarray] = LRU(Q_EMPTY)

    def default(self) -> list[str]:
        """The columns then the baseline."""
        return list(self.columns) + ([self.baseline] if self.baseline else [])

    def get(self, name: str) -> Method:
        """The built method `name`; raises the `CIRError` that explains why it is unavailable.
        Building it is a one-time build; waiting while another request builds one is a wait
        (`cir_core.timing`)."""
        if name not in self._built:
            with charged("wait"):
                self._lock.acquire()
            try:
                if name not in self._built:
                    with one_time_build(f"loading {method_label(name)}", unit="step"):
                        self._built[name] = self._build(name)
            finally:
                self._lock.release()
        found = self._built[name]
        if isinstance(found, Exception):
            raise found
        return found

    def _build(self, name: str) -> Method | CIRError:
        try:
            if name not in list_methods():
                raise CheckpointError(f"{method_label(name)} is not available: no method "
                                      f"'{name}' is registered in this build")
            ckpt = self.checkpoints.folder_for(name) if get_method_class(name).needs_checkpoint else None
            if ckpt is not None and not ckpt.exists():
                raise CheckpointError(f"{method_label(name)}: no checkpoint at {ckpt}")
            return self._batched(create_method(name, self.memo, ckpt))
        except CIRError as exc:
            return exc
        except Exception as exc:  # a broken checkpoint or method must not take the app down
            log.exception("method %s failed to load", name)
            return CheckpointError(f"{method_label(name)} failed to load: {type(exc).__name__}: {exc}".splitlines()[0])

    def install(self, name: str, method: Method) -> None:
        """Use an already built method under `name` (e.g. one at random init, for benchmarks);
        build it on `self.memo` so it shares the request's text encodes."""
        with self._lock:
            self._built[name] = self._batched(method)

    def _batched(self, method: Method) -> Method:
        # a BatchedMethod stands in for its Method: the compositions its own, the rest by __getattr__
        return method if self.queue is None else cast(Method, BatchedMethod(method, self.queue))

    def status(self, names: Sequence[str] | None = None) -> dict[str, str | None]:
        """name -> None when it works, else the message saying why not."""
        out: dict[str, str | None] = {}
        for n in names if names is not None else self.default():
            try:
                self.get(n)
                out[n] = None
            except CIRError as exc:
                out[n] = str(exc)
        return out

    def available(self) -> list[str]:
        """Every registered method that can be built here, the app's columns first."""
        order = list(dict.fromkeys([*self.default(), *list_methods()]))
        return [n for n, err in self.status(order).items() if err is None]

    # -- q_∅ per (method, reference) --------------------------------------------------------------
    def cached_q_empty(self, name: str, ref_key: tuple | None) -> np.ndarray | None:
        """q_∅ of method `name` for the reference identified by `ref_key`, if a request computed it."""
        return None if ref_key is None else self._q_empty.get((name, ref_key))

    def remember_q_empty(self, name: str, ref_key: tuple | None, q0: np.ndarray) -> None:
        if ref_key is not None:
            self._q_empty.put((name, ref_key), q0)

