"""Periodic snapshot pushes of the annotation DB, and the one call the app makes at startup.

`start_persistence(db_path)` restores the DB from `$CIR_DB_REPO` when the local file is absent,
then starts a `SnapshotScheduler`: a daemon thread that every `$CIR_DB_SNAPSHOT_EVERY` seconds
(default 300) pushes a snapshot if the DB changed, plus a final one at clean shutdown.
"""
from __future__ import annotations

import atexit
import logging
import signal
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from cir_core import env
from cir_core.errors import InputError
from cir_core.storage import NotFound

from .core import connect_existing, snapshot
from .persist import ANY, DEFAULT_KEEP, RestoreResult, check_keep, push, restore
from .remote import Remote, remote_from_spec

log = logging.getLogger(__name__)

DEFAULT_EVERY_S = 300.0


class SnapshotScheduler:
    """Pushes a snapshot of `db_path` to `remote` every `every` seconds when it changed.

    "Changed" is checked cheaply first (`PRAGMA data_version` on a connection this object keeps,
    which moves whenever another connection commits) and then exactly (the snapshot's sha256
    against the last pushed one: an unchanged DB snapshots byte-identically). Failures are logged
    and retried next tick; they never stop the thread.
    """

    def __init__(self, db_path: str | Path, remote: Remote, *, every: float = DEFAULT_EVERY_S,
                 keep: int = DEFAULT_KEEP, expect_latest: Any = ANY,
                 last_sha: str | None = None) -> None:
        if not every > 0:
            raise InputError(f"snapshot interval must be > 0 seconds, got {every!r}")
        self.db_path = Path(db_path)
        self.remote = remote
        self.every = float(every)
        self.keep = check_keep(keep)
        self.pushes = 0
        self.last_status: str | None = None
        self.last_error: str | None = None
        self._expect = expect_latest
        self._last_sha = last_sha
        self._last_version: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _data_version(self) -> int:
        if self._conn is None:
            self._conn = connect_existing(self.db_path)
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def tick(self) -> str:
        """One check: "pushed", "unchanged", "conflict" or "no-db"; raises on failure."""
        with self._lock:
            if not self.db_path.is_file():
                self.last_status = "no-db"
                return self.last_status
            # Read before snapshotting: a commit that lands during the snapshot moves it again,
            # so the next tick looks (and finds it in the snapshot already, or pushes it).
            version = self._data_version()
            if version == self._last_version:
                self.last_status = "unchanged"
                return self.last_status
            with tempfile.TemporaryDirectory(prefix="cir-db-snap-") as tmp:
                snap = snapshot(self.db_path, tmp)
                sha = snap.meta["sha256"]
                if sha == self._last_sha:
                    status = "unchanged"
                else:
                    result = push(snap, self.remote, keep=self.keep, expect_latest=self._expect)
                    status = result.status
                    if status == "pushed":
                        self.pushes += 1
                        if self._expect is not ANY:
                            self._expect = result.path
                    self._last_sha = sha
                self._last_version = version
            self.last_status, self.last_error = status, None
            return status

    def safe_tick(self) -> str:
        """`tick`, with any failure logged (and kept in `last_error`) instead of raised."""
        try:
            return self.tick()
        except Exception as e:  # noqa: BLE001 - the thread must survive Hub outages
            self.last_status, self.last_error = "error", str(e)
            log.error("annotation DB snapshot to %s failed (retrying in %.0fs): %s",
                      self.remote.describe(), self.every, e)
            return "error"

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.safe_tick()

    def start(self) -> SnapshotScheduler:
        """Start the daemon thread and register the final snapshot with atexit."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="db-snapshot", daemon=True)
            self._thread.start()
            atexit.register(self.stop)
        return self

    def stop(self, final: bool = True) -> str | None:
        """Stop the thread; with `final`, push once more if anything changed. Idempotent."""
        already = self._stop.is_set()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            atexit.unregister(self.stop)
        status = self.safe_tick() if final and not already else None
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        return status


def env_number(name: str, default: float, cast: type) -> Any:
    raw = env.read(name)
    if raw is None:
        return cast(default)
    try:
        return cast(raw)
    except ValueError:
        raise InputError(f"{name} must be a number, got {raw!r}") from None


def _raise_exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _exit_on_sigterm() -> None:
    # Spaces stop a container with SIGTERM; Python's default dies without running atexit, so
    # the final snapshot would be skipped. Only when nobody else handles it, and only from the
    # main thread (the only one allowed to set handlers).
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)


def start_persistence(db_path: str | Path, repo: str | None = None, *, token: str | None = None,
                      every: float | None = None, keep: int | None = None,
                      remote: Remote | None = None, start: bool = True,
                      handle_sigterm: bool = True) -> SnapshotScheduler | None:
    """Restore `db_path` from `repo` if absent, then start pushing snapshots; None if not configured.

    `repo` defaults to `$CIR_DB_REPO` (`owner/name` dataset repo, or `file:///folder`), the token
    to `$HF_TOKEN`, `every` to `$CIR_DB_SNAPSHOT_EVERY` (300 s), `keep` to
    `$CIR_DB_SNAPSHOT_KEEP` (20). Call it before the app opens the DB. An empty or unreachable
    repo never stops the app: it starts with an empty DB and says so at ERROR level.
    """
    repo = repo if repo is not None else env.read("CIR_DB_REPO")
    from db.sqlite import describe, is_url

    if is_url(str(db_path)) and not str(db_path).startswith("sqlite:"):
        if repo or remote is not None:
            log.error("CIR_DB_REPO is ignored: snapshots are for a SQLite file, and the annotation "
                      "DB is the server database %s (back it up with the server's own tools)",
                      describe(str(db_path)))
        return None
    if remote is None and not repo:
        level = logging.WARNING if env.read("SPACE_ID") else logging.INFO
        log.log(level, "CIR_DB_REPO is not set: annotation DB %s is NOT persisted anywhere; on a "
                "Space it is lost at every restart", db_path)
        return None
    every = every if every is not None else env_number("CIR_DB_SNAPSHOT_EVERY", DEFAULT_EVERY_S, float)
    keep = keep if keep is not None else env_number("CIR_DB_SNAPSHOT_KEEP", DEFAULT_KEEP, int)
    remote = remote or remote_from_spec(repo or "")
    db_path = Path(db_path)
    result, expect = RestoreResult("skipped"), ANY
    try:
        result = restore(db_path, remote)
        expect = result.snapshot if result.status == "restored" else ANY
    except NotFound as e:
        expect = None  # nothing there yet: our first push creates the pointer
        log.error("ANNOTATION DB STARTS EMPTY: %s. Judgments made now are pushed to %s as the "
                  "first snapshot.", e, remote.describe())
    except Exception as e:  # noqa: BLE001 - whatever went wrong, the app must still start
        # Unreachable, a bad snapshot, a full disk: the repo may hold judgments we could not
        # load, so pushes must not move its pointer (expect None -> a pointer means "conflict").
        expect = None
        log.error("ANNOTATION DB STARTS EMPTY: could not restore from %s: %s. Snapshots from "
                  "this run will not replace the repo's latest.json; fix the repo/token and "
                  "restart, or restore by hand with `python -m db.snapshot restore`.",
                  remote.describe(), e)
    sched = SnapshotScheduler(db_path, remote, every=every, keep=keep, expect_latest=expect,
                              last_sha=result.sha256)
    if start:
        sched.start()
        if handle_sigterm:
            _exit_on_sigterm()
    log.info("annotation DB %s: snapshots to %s every %.0fs (keeping %d)", db_path,
             remote.describe(), every, keep)
    return sched
