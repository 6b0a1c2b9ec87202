"""Keep the annotation DB across Space restarts: push snapshots to a repo, restore on start.

Repo layout: `snapshots/<ts>.sqlite` + `snapshots/<ts>.json` (sidecar), `latest.json` (the
pointer: the sidecar plus `snapshot`, the repo path of the file), `conflicts/<ts>.*` (snapshots
that were not allowed to move the pointer; never pruned). The scheduler and `start_persistence`
live in `scheduler.py`.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cir_core.errors import InputError
from cir_core.fileio import fsync_path, loads_json
from cir_core.storage import NotFound

from .core import (
    TS_RE,
    Snapshot,
    SnapshotError,
    SnapshotIntegrityError,
    utc_stamp,
    verify_snapshot,
)
from .remote import Remote

log = logging.getLogger(__name__)

LATEST = "latest.json"
SNAP_DIR = "snapshots"
CONFLICT_DIR = "conflicts"
DEFAULT_KEEP = 20


class _Any:
    """Sentinel: push without checking what latest.json points at."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()


@dataclass(frozen=True)
class PushResult:
    """`status` is "pushed" (pointer moved) or "conflict" (kept under conflicts/, pointer not)."""

    status: str
    path: str
    pruned: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RestoreResult:
    """`status` is "restored" or "skipped" (a local DB exists and force was not given)."""

    status: str
    snapshot: str | None = None
    sha256: str | None = None
    moved_aside: list[Path] = field(default_factory=list)


def read_latest(remote: Remote) -> dict[str, Any] | None:
    """The parsed `latest.json`, or None when the remote has none (empty / new repo)."""
    try:
        local = remote.download(LATEST)
    except NotFound:
        return None
    try:
        pointer = loads_json(Path(local).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SnapshotError(f"{LATEST} in {remote.describe()} is unreadable: {e}") from e
    missing = [k for k in ("snapshot", "sha256", "size") if not isinstance(pointer, dict) or k not in pointer]
    if missing:
        raise SnapshotError(f"{LATEST} in {remote.describe()} lacks {', '.join(missing)}")
    snap = str(pointer["snapshot"])
    # Only ever one of our own names: a pointer must not lead a download outside snapshots/.
    if not (snap.startswith(f"{SNAP_DIR}/") and snap.endswith(".sqlite")
            and TS_RE.match(snap[len(SNAP_DIR) + 1:-len(".sqlite")])):
        raise SnapshotError(f"{LATEST} in {remote.describe()} points at {snap!r}, not snapshots/<ts>.sqlite")
    return pointer


def check_keep(keep: int) -> int:
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise InputError(f"keep must be an integer >= 1 (snapshots kept on the remote), got {keep!r}")
    return keep


def push(snap: Snapshot, remote: Remote, *, keep: int = DEFAULT_KEEP, expect_latest: Any = ANY,
         allow_older: bool = False) -> PushResult:
    """Upload `snap` and move `latest.json` to it in one change, pruning all but the newest `keep`.

    `expect_latest` (a repo path, or None for "no pointer yet") guards against overwriting data
    this process never saw: if the pointer is elsewhere, the snapshot goes to `conflicts/` and the
    pointer stays. The file is re-verified first: a copy that is not "ok" is never uploaded.
    A snapshot older than the one `latest.json` names is refused unless `allow_older` (a rollback).
    """
    check_keep(keep)
    verify_snapshot(snap.path, snap.meta.get("sha256"), snap.meta.get("size"))
    current = read_latest(remote)
    current_path = current["snapshot"] if current else None
    if current_path and Path(current_path).stem > snap.name and not allow_older:
        raise SnapshotError(f"snapshot {snap.name} is older than {current_path} in "
                            f"{remote.describe()}; refusing to roll latest.json back (allow_older)")
    if expect_latest is not ANY:
        if current_path != expect_latest:
            rel = f"{CONFLICT_DIR}/{snap.name}.sqlite"
            remote.upload({rel: snap.path, f"{CONFLICT_DIR}/{snap.name}.json": snap.sidecar}, [],
                          f"annotation DB snapshot {snap.name} (conflict: pointer not moved)")
            log.error("latest.json in %s points at %s, not %s as this process expected (another "
                      "writer, or this instance started without restoring). Uploaded %s instead and "
                      "left the pointer alone; reconcile by hand.", remote.describe(), current_path,
                      expect_latest, rel)
            return PushResult("conflict", rel)
    rel = f"{SNAP_DIR}/{snap.name}.sqlite"
    existing = set(remote.list_files(f"{SNAP_DIR}/"))
    names = {Path(p).stem for p in existing if TS_RE.match(Path(p).stem)} | {snap.name}
    old = [n for n in sorted(names)[:-keep] if n != snap.name]
    # Only files that are there: a Hub commit fails on deleting a missing one.
    deletes = [d for n in old for d in (f"{SNAP_DIR}/{n}.sqlite", f"{SNAP_DIR}/{n}.json") if d in existing]
    with tempfile.TemporaryDirectory(prefix="cir-db-push-") as tmp:
        pointer_file = Path(tmp) / LATEST
        pointer_file.write_text(json.dumps({**snap.meta, "snapshot": rel}, indent=2, sort_keys=True),
                                encoding="utf-8")
        remote.upload({rel: snap.path, f"{SNAP_DIR}/{snap.name}.json": snap.sidecar,
                       LATEST: pointer_file}, deletes, f"annotation DB snapshot {snap.name}")
    log.info("pushed annotation DB snapshot %s to %s (%s rows; pruned %d)", rel, remote.describe(),
             sum(snap.meta.get("row_counts", {}).values()), len(old))
    return PushResult("pushed", rel, [f"{SNAP_DIR}/{n}.sqlite" for n in old])


def _sqlite_family(db_path: Path) -> list[Path]:
    return [p for p in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm"),
                        Path(f"{db_path}-journal")) if p.exists()]


def restore(db_path: str | Path, remote: Remote, *, force: bool = False) -> RestoreResult:
    """Put the remote's latest snapshot at `db_path` (only if absent, unless `force`).

    Run it before anything opens the DB. The download is copied next to `db_path`, checked
    (sha256, size, integrity_check) and only then renamed into place, so a bad or partial
    snapshot leaves the local files untouched. With `force`, an existing DB (and its -wal/-shm)
    is renamed to `<name>.pre-restore-<ts>`, never deleted. Raises NotFound when the
    remote holds no snapshot, Unreachable when it cannot be reached,
    SnapshotIntegrityError for a bad file.
    """
    db_path = Path(db_path)
    if db_path.exists() and not force:
        log.info("annotation DB %s exists; not restoring from %s (use force to replace it)",
                 db_path, remote.describe())
        return RestoreResult("skipped")
    pointer = read_latest(remote)
    if pointer is None:
        raise NotFound(f"no snapshot to restore: {remote.describe()} has no {LATEST}")
    downloaded = remote.download(pointer["snapshot"])
    db_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = db_path.with_name(f".{db_path.name}.restore-{os.getpid()}.part")
    aside: list[Path] = []
    try:
        # Verify the copy we are about to rename, not the download: nothing can change in between.
        shutil.copyfile(downloaded, tmp)
        try:
            verify_snapshot(tmp, pointer["sha256"], pointer["size"])
        except SnapshotIntegrityError as e:
            raise SnapshotIntegrityError(
                f"refusing {pointer['snapshot']} from {remote.describe()} ({db_path} left as it "
                f"was): {str(e).replace(str(tmp), 'the download')}") from e
        fsync_path(tmp)
        stamp = utc_stamp()
        # A stale -wal next to a new main file would be replayed into it: move the whole family.
        for p in _sqlite_family(db_path):
            dst = p.with_name(p.name.replace(db_path.name, f"{db_path.name}.pre-restore-{stamp}", 1))
            os.replace(p, dst)
            aside.append(dst)
        os.replace(tmp, db_path)
    finally:
        tmp.unlink(missing_ok=True)
    for p in aside:
        log.warning("moved existing %s aside to %s before restoring", db_path.name, p)
    log.info("restored annotation DB %s from %s (%s, rows %s)", db_path, remote.describe(),
             pointer["snapshot"], pointer.get("row_counts"))
    return RestoreResult("restored", pointer["snapshot"], pointer["sha256"], aside)
