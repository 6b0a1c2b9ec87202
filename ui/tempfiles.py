"""Short-lived folders for the files a handler hands to Gradio (figure exports, judgment exports,
which hold annotators' comments), and Gradio's own upload and cache folder.

`TempDirs.new(prefix)` makes a folder under one per-process root (`$TMPDIR/cir-app-<pid>-XXXX/`),
which is one of Gradio's static paths: Gradio serves the files from there (to signed-in users,
when the app has sign-in) and makes no copy of them in its own cache. So the only copy is ours:
folders older than `ttl_s` (an hour: time to press download) are removed on the next `new()` and
by a daemon sweeper, the whole root at interpreter exit (SIGTERM included, see
`exit_cleanly_on_sigterm`), and the roots a killed process left behind (its pid no longer
running) when the next one makes its own. Gradio's cache kept copies of these exports past a
clean shutdown before (issue 27): its `delete_cache` runs only when uvicorn's lifespan ends.

Gradio's own folder (uploads, the pictures a handler returns) is `gradio_dir()`, inside the same
root, so it goes with it at exit and at the next start after a kill: `GRADIO_TEMP_DIR` pointed it
to a shared `/tmp/gradio` before, where uploads and figure previews outlived every shutdown
(issue 42). A folder made for one user (`new(prefix, owner=...)`) is served to that user only
(`ui.http_guard`).
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

from cir_core import env

log = logging.getLogger(__name__)

TTL_S = 3600.0
PREFIX = "cir-app-"
GRADIO = "gradio"  # Gradio's uploads and cache, inside the root; Gradio's delete_cache sweeps it


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def sweep_orphans(parent: str | Path | None = None) -> int:
    """Remove the roots (`cir-app-<pid>-*`) of processes that no longer run (a kill -9, a power
    cut); returns how many. A pid reused by a live process keeps its root: the safe side."""
    n = 0
    for d in Path(parent or tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = d.name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)) and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
            n += 1
    return n


class TempDirs:
    def __init__(self, ttl_s: float = TTL_S, parent: str | Path | None = None, sweeper: bool = True,
                 serve: bool = True):
        self.ttl_s = float(ttl_s)
        self._parent = parent
        self._root: Path | None = None
        self._lock = threading.Lock()
        self._sweeper = sweeper
        self._serve = serve  # register the root as a Gradio static path (no copies in its cache)
        self._stop = threading.Event()
        self._owners: dict[str, str] = {}  # folder -> the user it was made for

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None or not self._root.is_dir():
                sweep_orphans(self._parent)
                self._root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=self._parent))
                if self._serve:
                    import gradio as gr

                    gr.set_static_paths([self._root])
                if self._sweeper:
                    threading.Thread(target=self._sweep_loop, name="cir-tempdirs", daemon=True).start()
            return self._root

    def new(self, prefix: str, owner: str | None = None) -> Path:
        """A new empty folder; sweeps the expired ones first. With `owner`, its files are served
        to that signed-in user only (`owner_of`)."""
        self.sweep()
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))
        if owner is not None:
            with self._lock:
                self._owners[str(folder)] = owner
        return folder

    def owner_of(self, path: str) -> str | None:
        """The user a served path's folder was made for, or None (not one of ours, or nobody's).
        Reads only the path string: nothing is opened."""
        root = self._root
        if root is None or not isinstance(path, str) or "\x00" in path:
            return None
        norm = os.path.normpath(path)
        try:
            if os.path.commonpath([str(root), norm]) != str(root):
                return None
        except ValueError:  # relative vs absolute
            return None
        rel = os.path.relpath(norm, root).split(os.sep)[0]
        with self._lock:
            return self._owners.get(str(root / rel))

    def gradio_dir(self) -> Path:
        """Gradio's upload and cache folder for this process (`GRADIO_TEMP_DIR`), made if needed."""
        folder = self.root / GRADIO
        folder.mkdir(exist_ok=True)
        return folder

    def sweep(self, now: float | None = None) -> int:
        """Remove folders older than the TTL; returns how many were removed."""
        root = self._root
        if root is None or not root.is_dir():
            return 0
        now = time.time() if now is None else now
        n = 0
        for d in root.iterdir():
            if d.name == GRADIO:
                continue  # Gradio's folder: its own delete_cache ages its files out
            try:
                if now - d.stat().st_mtime > self.ttl_s:
                    shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink()
                    with self._lock:
                        self._owners.pop(str(d), None)
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
            self._owners.clear()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


TEMP = TempDirs(ttl_s=float(env.read("CIR_TEMP_TTL_S") or TTL_S))
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
