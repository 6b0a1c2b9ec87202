"""Snapshots of the annotation DB and their trip to a Hub dataset repo (or a folder).

`core` makes and verifies one snapshot, `persist` pushes and restores them, `scheduler` pushes on
a timer (`start_persistence`, what the app calls), `remote` is where they are kept (a repo of `cir_core.storage`), and
`python -m db.snapshot` is the operator's CLI (`__main__.py`).
"""
from .core import Snapshot, SnapshotError, SnapshotIntegrityError, load_snapshot, snapshot, verify_snapshot
from .persist import DEFAULT_KEEP, LATEST, push, read_latest, restore
from .scheduler import SnapshotScheduler, start_persistence

__all__ = ["Snapshot", "SnapshotError", "SnapshotIntegrityError", "snapshot", "load_snapshot", "verify_snapshot", "push",
           "read_latest", "restore", "DEFAULT_KEEP", "LATEST", "SnapshotScheduler", "start_persistence"]
