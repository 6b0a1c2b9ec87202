"""Shared by the snapshot tests: a tiny schema of our own (the real one is changing in
parallel), writers configured like db/engine.py, and the folder stand-in for the Hub."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from cir_core.storage import FolderStore, Unreachable
from db.snapshot.core import snapshot
from db.snapshot.persist import push, read_latest
from db.snapshot.remote import FOLDER_REPO, Remote


def connect_wal(path: Path) -> sqlite3.Connection:
    # Same settings as db/engine.py, without depending on its (changing) schema.
    conn = sqlite3.connect(path, isolation_level=None, timeout=5, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def make_db(path: Path, n: int = 3) -> Path:
    conn = connect_wal(path)
    conn.execute("CREATE TABLE events (thread INTEGER, seq INTEGER, note TEXT, PRIMARY KEY (thread, seq))")
    conn.execute("CREATE TABLE mirror (thread INTEGER, seq INTEGER, PRIMARY KEY (thread, seq))")
    for i in range(n):
        write_pair(conn, 9, i)
    conn.close()
    return path


def write_pair(conn: sqlite3.Connection, thread: int, seq: int) -> None:
    """One transaction, two tables: a consistent copy has the same rows in both."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO events VALUES (?, ?, ?)", (thread, seq, f"t{thread}s{seq}"))
    conn.execute("INSERT INTO mirror VALUES (?, ?)", (thread, seq))
    conn.execute("COMMIT")


def rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM events ORDER BY thread, seq").fetchall()
    finally:
        conn.close()


class CountingRemote(Remote):
    """A folder remote, counting calls; `down=True` makes it behave like an outage."""

    def __init__(self, root: Path) -> None:
        super().__init__(FolderStore(root, root / ".cache"), FOLDER_REPO)
        self.downloads = 0
        self.uploads = 0
        self.down = False

    def download(self, path: str) -> Path:
        self.downloads += 1
        if self.down:
            raise Unreachable("simulated outage")
        return super().download(path)

    def upload(self, adds: Any, deletes: Any, message: str) -> None:
        if self.down:
            raise Unreachable("simulated outage")
        self.uploads += 1
        super().upload(adds, deletes, message)


def pushed_file(db: Path, remote: Remote, tmp_path: Path) -> Path:
    """Push a snapshot of `db`; the remote's file it is now."""
    push(snapshot(db, tmp_path / "s"), remote)
    return remote.download(read_latest(remote)["snapshot"])
