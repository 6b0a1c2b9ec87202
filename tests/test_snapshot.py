"""DB snapshots: consistency under concurrent writers, the sidecar, push/restore through a
folder stand-in for the Hub, refusal of tampered/truncated snapshots, pruning, the CLI."""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from _snapshot_fakes import CountingRemote, connect_wal, make_db, pushed_file, rows, write_pair

from cir_core.errors import InputError
from cir_core.storage import NotFound, Unreachable
from db.snapshot.__main__ import run as cli
from db.snapshot.core import (
    TS_RE,
    SnapshotError,
    SnapshotIntegrityError,
    load_snapshot,
    snapshot,
    verify_snapshot,
)
from db.snapshot.persist import LATEST, push, read_latest, restore


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return make_db(tmp_path / "ann.sqlite")


@pytest.fixture()
def remote(tmp_path: Path) -> CountingRemote:
    return CountingRemote(tmp_path / "repo")


@pytest.mark.timeout(60)
def test_snapshot_during_two_writers_is_consistent_prefix(db: Path, tmp_path: Path) -> None:
    stop, errors = threading.Event(), []

    def writer(tid: int) -> None:
        conn = connect_wal(db)
        try:
            seq = 0
            while not stop.is_set() and seq < 20000:  # bounded, should a snapshot be slow
                write_pair(conn, tid, seq)
                seq += 1
        except Exception as e:  # noqa: BLE001 - surfaced by the assert below
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=writer, args=(t,)) for t in (0, 1)]
    for t in threads:
        t.start()
    def wait_for_more_than(n: int) -> None:
        # Poll, not sleep: on a loaded machine the writers may not have run at all yet.
        deadline = time.monotonic() + 20
        while len(rows(db)) <= n and time.monotonic() < deadline and not errors:
            time.sleep(0.01)

    snaps, seen = [], 3
    try:
        for _ in range(3):
            wait_for_more_than(seen)
            snaps.append(snapshot(db, tmp_path / "snaps"))
            seen = snaps[-1].meta["row_counts"]["events"]
        wait_for_more_than(seen)  # and more writes after the last one
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    final = len(rows(db))
    for snap in snaps:
        verify_snapshot(snap.path, snap.meta["sha256"], snap.meta["size"])  # integrity_check ok
        conn = sqlite3.connect(snap.path)
        ev = conn.execute("SELECT thread, seq FROM events WHERE thread < 9 ORDER BY 1, 2").fetchall()
        mi = conn.execute("SELECT thread, seq FROM mirror WHERE thread < 9 ORDER BY 1, 2").fetchall()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # self-contained
        conn.close()
        assert ev == mi  # both halves of every transaction, or neither
        for tid in (0, 1):
            seqs = [s for t, s in ev if t == tid]
            assert seqs == list(range(len(seqs)))  # a prefix: no gaps
        assert snap.meta["row_counts"] == {"events": len(ev) + 3, "mirror": len(mi) + 3}
    counts = [s.meta["row_counts"]["events"] for s in snaps]
    assert 3 < counts[0] < counts[1] < counts[2] < final  # each taken mid-write
    assert not list((tmp_path / "snaps").glob(".*"))  # no temp files left


def test_snapshot_name_sidecar_and_alembic_version(db: Path, tmp_path: Path) -> None:
    conn = connect_wal(db)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    conn.execute("INSERT INTO alembic_version VALUES ('abc123')")
    conn.close()
    snap = snapshot(db, tmp_path / "out")
    assert TS_RE.match(snap.name) and snap.path.name == f"{snap.name}.sqlite"
    side = json.loads(snap.sidecar.read_text())
    assert side["alembic_version"] == "abc123"
    assert side["row_counts"] == {"alembic_version": 1, "events": 3, "mirror": 3}
    assert side["size"] == snap.path.stat().st_size and len(side["sha256"]) == 64
    assert side["source_host"] and side["created_at"].endswith("+00:00")
    assert load_snapshot(snap.path).meta == side


def test_snapshot_of_missing_or_non_db_file(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no database file"):
        snapshot(tmp_path / "nope.sqlite", tmp_path / "out")
    assert not (tmp_path / "nope.sqlite").exists()  # not created by the attempt
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(SnapshotError, match="junk.sqlite"):
        snapshot(junk, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_push_restore_round_trip(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    result = push(snapshot(db, tmp_path / "s"), remote)
    assert result.status == "pushed" and read_latest(remote)["snapshot"] == result.path
    target = tmp_path / "restored" / "ann.sqlite"
    res = restore(target, remote)
    assert res.status == "restored" and res.snapshot == result.path
    assert rows(target) == rows(db) and len(rows(db)) == 3


@pytest.mark.parametrize("local_exists", [False, True])
def test_restore_refuses_tampered_snapshot(db: Path, remote: CountingRemote, tmp_path: Path,
                                           local_exists: bool) -> None:
    remote_file = pushed_file(db, remote, tmp_path)
    data = bytearray(remote_file.read_bytes())
    data[-100] ^= 0xFF
    remote_file.write_bytes(bytes(data))
    target = tmp_path / "local" / "ann.sqlite"
    target.parent.mkdir()
    if local_exists:
        make_db(target, n=7)
    before = target.read_bytes() if local_exists else None
    with pytest.raises(SnapshotIntegrityError, match="sha256"):
        restore(target, remote, force=True)
    assert (target.read_bytes() if target.exists() else None) == before
    assert sorted(p.name for p in target.parent.iterdir()) == (["ann.sqlite"] if local_exists else [])


def test_restore_refuses_truncated_snapshot_even_if_pointer_agrees(db: Path, remote: CountingRemote,
                                                                   tmp_path: Path) -> None:
    conn = connect_wal(db)
    with conn:  # one transaction; several pages, so truncation cuts real b-tree pages
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO events VALUES (9, ?, ?)", [(i, "x" * 50) for i in range(3, 400)])
    conn.close()
    remote_file = pushed_file(db, remote, tmp_path)
    remote_file.write_bytes(remote_file.read_bytes()[: remote_file.stat().st_size // 2])
    pointer = json.loads(remote.download(LATEST).read_text())
    with pytest.raises(SnapshotIntegrityError, match="bytes, expected"):
        restore(tmp_path / "a.sqlite", remote)
    # A pointer rewritten to match the bad file: integrity_check still refuses it.
    from cir_core.fileio import sha256_file

    pointer.update(sha256=sha256_file(remote_file), size=remote_file.stat().st_size)
    remote.download(LATEST).write_text(json.dumps(pointer))
    with pytest.raises(SnapshotIntegrityError, match="integrity_check|not a readable"):
        restore(tmp_path / "a.sqlite", remote)
    assert not (tmp_path / "a.sqlite").exists()


def test_restore_skips_existing_local_db(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    pushed_file(db, remote, tmp_path)
    local = make_db(tmp_path / "other.sqlite", n=5)
    before, downloads = local.read_bytes(), remote.downloads
    assert restore(local, remote).status == "skipped"
    assert local.read_bytes() == before and remote.downloads == downloads  # not even looked


def test_restore_force_keeps_previous_db_and_its_wal(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    import shutil

    pushed_file(db, remote, tmp_path)
    live = make_db(tmp_path / "live.sqlite", n=5)
    conn = connect_wal(live)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    write_pair(conn, 1, 0)  # committed, but only in live.sqlite-wal
    local = tmp_path / "crashed.sqlite"  # what a killed app leaves: main file + -wal
    shutil.copyfile(live, local)
    shutil.copyfile(f"{live}-wal", f"{local}-wal")
    conn.close()
    res = restore(local, remote, force=True)
    assert rows(local) == rows(db)
    main, wal = res.moved_aside
    assert wal.name == f"{main.name}-wal" and main.name.startswith("crashed.sqlite.pre-restore-")
    assert len(rows(main)) == 6  # the old DB, including its WAL-only commit


def test_restore_from_empty_or_unreachable_remote(remote: CountingRemote, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="latest.json"):
        restore(tmp_path / "a.sqlite", remote)
    remote.down = True
    with pytest.raises(Unreachable):
        restore(tmp_path / "a.sqlite", remote)
    assert not (tmp_path / "a.sqlite").exists()


def test_keep_last_n_pruning(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    names = []
    for i in range(5):
        snap = snapshot(db, tmp_path / "s")
        names.append(snap.name)
        res = push(snap, remote, keep=3)
        assert res.pruned == ([f"snapshots/{names[i - 3]}.sqlite"] if i >= 3 else [])
    files = remote.list_files("snapshots/")
    assert files == sorted(f"snapshots/{n}{e}" for n in names[2:] for e in (".json", ".sqlite"))
    assert read_latest(remote)["snapshot"] == f"snapshots/{names[-1]}.sqlite"
    with pytest.raises(InputError, match="keep"):
        push(snap, remote, keep=0)


def test_push_refuses_bad_copy_and_older_snapshot(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    older = snapshot(db, tmp_path / "s")
    newer = snapshot(db, tmp_path / "s")
    push(newer, remote)
    with pytest.raises(SnapshotError, match="older"):
        push(older, remote)
    assert push(older, remote, allow_older=True).status == "pushed"
    with open(newer.path, "r+b") as f:
        f.seek(200)
        f.write(b"\x00garbage")
    uploads = remote.uploads
    with pytest.raises(SnapshotIntegrityError):
        push(newer, remote, allow_older=True)
    assert remote.uploads == uploads


def test_cli_snapshot_push_restore(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    repo = f"file://{tmp_path / 'repo'}"
    assert cli(["snapshot", str(db), "--out", str(tmp_path / "out")]) == 0
    assert cli(["push", str(db), "--repo", repo, "--keep", "2"]) == 0
    assert cli(["restore", str(db), "--repo", repo]) == 0
    assert "nothing restored" in capsys.readouterr().out
    assert cli(["restore", str(tmp_path / "new.sqlite"), "--repo", repo]) == 0
    assert rows(tmp_path / "new.sqlite") == rows(db)
    assert cli(["snapshot", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "o")]) == 2
    assert "no database file" in capsys.readouterr().err


def test_pointer_outside_snapshots_is_refused(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    pushed_file(db, remote, tmp_path)
    pointer = json.loads(remote.download(LATEST).read_text())
    pointer["snapshot"] = "../../etc/passwd.sqlite"
    remote.download(LATEST).write_text(json.dumps(pointer))
    with pytest.raises(SnapshotError, match="points at"):
        restore(tmp_path / "x.sqlite", remote)
    assert not (tmp_path / "x.sqlite").exists()
