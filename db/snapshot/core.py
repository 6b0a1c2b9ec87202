"""Consistent snapshots of the live annotation DB, and their verification.

A snapshot is `<out_dir>/<UTC timestamp>.sqlite` (a self-contained, rollback-journal copy) plus a
`<timestamp>.json` sidecar: row counts per table, sha256, size, created_at, alembic version,
source host. Nothing here knows the schema: tables are read from `sqlite_master`.
Pushing to / restoring from a Hub dataset repo lives in `persist.py`, the schedule in
`scheduler.py`; the operator CLI (`python -m db.snapshot {snapshot,push,restore,list}`) in
`__main__.py`.
"""
from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cir_core import env
from cir_core.errors import CIRError
from cir_core.fileio import atomic_write, fsync_path, loads_json, sha256_file

# Lexicographic order == time order, which pruning relies on; microseconds keep two snapshots in
# one second (a scheduled one, then the final one at shutdown) from colliding.
TS_FORMAT = "%Y%m%dT%H%M%S.%fZ"
TS_RE = re.compile(r"^\d{8}T\d{6}\.\d{6}Z$")
BUSY_TIMEOUT_S = 5.0


class SnapshotError(CIRError):
    """A snapshot could not be made, pushed or restored; the message says which file or repo."""


class SnapshotIntegrityError(SnapshotError):
    """A snapshot file is not what it claims: wrong sha256/size, or integrity_check is not ok."""


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot file and the metadata written to its JSON sidecar."""

    path: Path
    meta: dict[str, Any]

    @property
    def name(self) -> str:
        """The UTC timestamp that names the file (no extension)."""
        return self.path.stem

    @property
    def sidecar(self) -> Path:
        """The `<timestamp>.json` next to the file."""
        return self.path.with_suffix(".json")


def utc_stamp(now: datetime | None = None) -> str:
    """UTC timestamp in the snapshot-name format, e.g. `20260509T073525.123456Z`."""
    return (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime(TS_FORMAT)




def connect_existing(path: Path, readonly: bool = False) -> sqlite3.Connection:
    # A URI with mode=rw/ro never creates the file: a typo'd path must fail, not snapshot nothing.
    mode = "ro" if readonly else "rw"
    return sqlite3.connect(
        f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT_S,
        isolation_level=None, check_same_thread=False,
    )


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    """Rows of `PRAGMA integrity_check` other than the single "ok" (empty list = healthy)."""
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    return [] if rows == ["ok"] else rows


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Row count of every user table, by name."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )]
    return {n: conn.execute(f'SELECT count(*) FROM "{n.replace(chr(34), chr(34) * 2)}"').fetchone()[0]
            for n in names}


def alembic_version(conn: sqlite3.Connection) -> str | None:
    """`alembic_version.version_num` when that table exists (None before Alembic is set up)."""
    has = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'"
    ).fetchone()
    if not has:
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """JSON written whole or not at all (`cir_core.fileio.atomic_write`)."""
    atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, sort_keys=True) + "\n"), binary=False)


def snapshot(db_path: str | Path, out_dir: str | Path) -> Snapshot:
    """Consistent copy of a live (WAL, being written) SQLite DB into `out_dir`, verified.

    Raises SnapshotError when `db_path` is missing or not a database, and
    SnapshotIntegrityError (leaving no file behind) when the copy fails integrity_check.
    """
    db_path, out_dir = Path(db_path), Path(out_dir)
    if not db_path.is_file():
        raise SnapshotError(f"no database file at {db_path}")
    out_dir.mkdir(parents=True, exist_ok=True)
    name = utc_stamp()
    dst_path = out_dir / f"{name}.sqlite"
    tmp = out_dir / f".{name}.sqlite.part"
    if dst_path.exists():
        raise SnapshotError(f"snapshot {dst_path} already exists")
    try:
        # Backup API, not VACUUM INTO: one backup step (pages=-1) copies every page inside a
        # single read transaction, so the copy is exactly one committed state even while
        # writers commit to the WAL (WAL readers never block them). It copies pages verbatim,
        # so an unchanged DB gives a byte-identical copy (same sha256: the scheduler's
        # "nothing changed" test) which VACUUM INTO's rebuild does not promise, and it needs no
        # scratch space on the source side.
        src = connect_existing(db_path)
        try:
            dst = sqlite3.connect(tmp, isolation_level=None)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # The copy inherits the WAL flag; a rollback-journal file is self-contained (no
            # -wal/-shm to ship) and the engine re-enables WAL when it opens the restored file.
            conn.execute("PRAGMA journal_mode=DELETE")
            problems = integrity_problems(conn)
            counts = table_counts(conn) if not problems else {}
            version = alembic_version(conn) if not problems else None
        finally:
            conn.close()
        if problems:
            raise SnapshotIntegrityError(
                f"snapshot of {db_path} failed integrity_check: {'; '.join(problems[:5])}")
        fsync_path(tmp)
        meta = {
            "name": name,
            "file": f"{name}.sqlite",
            "created_at": datetime.now(timezone.utc).isoformat(),
            "sha256": sha256_file(tmp),
            "size": tmp.stat().st_size,
            "row_counts": counts,
            "alembic_version": version,
            "source_host": socket.gethostname(),
            "source_space": env.read("SPACE_ID"),
            "source_db": db_path.name,
            "sqlite_version": sqlite3.sqlite_version,
        }
        os.replace(tmp, dst_path)
    except (sqlite3.Error, OSError) as e:  # OSError: e.g. disk full while writing the copy
        raise SnapshotError(f"could not snapshot {db_path}: {e}") from e
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)
    snap = Snapshot(dst_path, meta)
    write_json_atomic(snap.sidecar, meta)
    return snap


def load_snapshot(path: str | Path) -> Snapshot:
    """A snapshot made earlier: the `.sqlite` file and its `.json` sidecar, re-verified."""
    path = Path(path)
    side = path.with_suffix(".json")
    if not path.is_file() or not side.is_file():
        raise SnapshotError(f"{path} is not a snapshot (needs the file and its {side.name} sidecar)")
    try:
        meta = loads_json(side.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SnapshotError(f"unreadable sidecar {side}: {e}") from e
    verify_snapshot(path, meta.get("sha256"), meta.get("size"))
    return Snapshot(path, meta)


def verify_snapshot(path: str | Path, sha256: str | None, size: int | None = None) -> None:
    """Raise SnapshotIntegrityError unless `path` has this sha256/size and passes integrity_check."""
    path = Path(path)
    if not sha256:
        raise SnapshotIntegrityError(f"no sha256 recorded for {path}; refusing to trust it")
    if size is not None and path.stat().st_size != size:
        raise SnapshotIntegrityError(
            f"{path} is {path.stat().st_size} bytes, expected {size} (truncated or replaced)")
    actual = sha256_file(path)
    if actual != sha256:
        raise SnapshotIntegrityError(f"{path} sha256 {actual[:12]}… != recorded {sha256[:12]}…")
    try:
        conn = connect_existing(path, readonly=True)
        try:
            problems = integrity_problems(conn)
            foreign = foreign_objects(conn)
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise SnapshotIntegrityError(f"{path} is not a readable SQLite database: {e}") from e
    if problems:
        raise SnapshotIntegrityError(f"{path} failed integrity_check: {'; '.join(problems[:5])}")
    if foreign:
        # A checksum only proves the file is the one the pointer names; whoever could write the
        # pointer could have made both. A trigger in a restored DB would run on every answer.
        raise SnapshotIntegrityError(f"{path} holds what no annotation DB has: {', '.join(foreign[:5])}")


def foreign_objects(conn: sqlite3.Connection) -> list[str]:
    """Schema objects an annotation DB never has and that would act on their own once restored:
    triggers (code run on every write) and views, as 'type name' strings. Tables are left to the
    migration check that runs when the app opens the file."""
    return [f"{kind} {name!r}" for kind, name in
            conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')")]
