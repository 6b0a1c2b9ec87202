"""Short-lived folders for the files a handler hands to Gradio (figure exports, judgment exports).

Gradio copies a returned file into its own cache when it post-processes the event, so our copy is
needed only for the few seconds until then. `TempDirs.new(prefix)` makes a folder under one
per-process root (`$TMPDIR/cir-app-XXXX/`); folders older than `ttl_s` are removed on the next
`new()` and by a daemon sweeper, and the whole root is removed at interpreter exit. Gradio's own
copies are cleaned by `gr.Blocks(delete_cache=...)` (see ui/__init__.py).
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

TTL_S = 120.0


class TempDirs:
    def __init__(self, ttl_s: float = TTL_S, parent: str | Path | None = None, sweeper: bool = True):
        self.ttl_s = float(ttl_s)
        self._parent = parent
        self._root: Path | None = None
        self._lock = threading.Lock()
        self._sweeper = sweeper
        self._stop = threading.Event()

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None or not self._root.is_dir():
                self._root = Path(tempfile.mkdtemp(prefix="cir-app-", dir=self._parent))
                if self._sweeper:
                    threading.Thread(target=self._sweep_loop, name="cir-tempdirs", daemon=True).start()
            return self._root

    def new(self, prefix: str) -> Path:
        """A new empty folder; sweeps the expired ones first."""
        self.sweep()
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))

    def sweep(self, now: float | None = None) -> int:
        """Remove folders older than the TTL; returns how many were removed."""
        root = self._root
        if root is None or not root.is_dir():
            return 0
        now = time.time() if now is None else now
        n = 0
        for d in root.iterdir():
            try:
                if now - d.stat().st_mtime > self.ttl_s:
                    shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink()
                    n += 1
            except FileNotFoundError:
                continue
        return n

    def _sweep_loop(self) -> None:
        while not self._stop.wait(max(self.ttl_s / 2, 1.0)):
            try:
                self.sweep()
            except OSError as exc:  # never let the sweeper die on a racing delete
                log.warning("temp sweep: %s", exc)

    def close(self) -> None:
        """Remove the root and everything in it (at exit, or when a test is done)."""
        self._stop.set()
        with self._lock:
            root, self._root = self._root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


TEMP = TempDirs(ttl_s=float(os.environ.get("CIR_TEMP_TTL_S", TTL_S)))
atexit.register(TEMP.close)


def exit_cleanly_on_sigterm() -> None:
    """SIGTERM (how `kill`, systemd and Spaces stop a process) as SystemExit, so atexit runs and
    the temporary folders go; only where nobody installed a handler already, and only from the
    main thread."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def _exit(signum: int, _frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _exit)
