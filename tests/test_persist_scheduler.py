"""Persistence at run time: the change-aware scheduler, start_persistence (restore, empty or
unreachable repo, env), SIGTERM's final snapshot, the Hub adapter (faked), the real engine."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from _snapshot_fakes import CountingRemote, connect_wal, make_db, pushed_file, rows, write_pair

from cir_core.errors import InputError
from cir_core.storage import HFStore, Unreachable
from db.snapshot.core import SnapshotError, snapshot
from db.snapshot.persist import push, read_latest, restore
from db.snapshot.remote import Remote, folder_remote, remote_from_spec
from db.snapshot.scheduler import SnapshotScheduler, start_persistence


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return make_db(tmp_path / "ann.sqlite")


@pytest.fixture()
def remote(tmp_path: Path) -> CountingRemote:
    return CountingRemote(tmp_path / "repo")


def test_scheduler_pushes_then_skips_unchanged_then_pushes_change(db: Path, remote: CountingRemote) -> None:
    sched = SnapshotScheduler(db, remote, every=3600)
    assert sched.tick() == "pushed"
    assert sched.tick() == "unchanged" and remote.uploads == 1
    conn = connect_wal(db)
    conn.execute("PRAGMA user_version")  # a read is not a change
    assert sched.tick() == "unchanged"
    write_pair(conn, 1, 0)
    conn.close()
    assert sched.tick() == "pushed" and remote.uploads == 2
    assert sched.stop() == "unchanged"  # final snapshot: nothing new
    assert len(remote.list_files("snapshots/")) == 4  # 2 x (.sqlite + .json)


def test_scheduler_survives_outage_and_thread_pushes(db: Path, remote: CountingRemote) -> None:
    remote.down = True
    sched = SnapshotScheduler(db, remote, every=0.05).start()
    deadline = time.monotonic() + 10
    while sched.last_status != "error" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sched.last_status == "error" and "outage" in sched.last_error
    remote.down = False
    while sched.pushes < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sched.pushes >= 1
    conn = connect_wal(db)
    write_pair(conn, 2, 0)
    conn.close()
    # The thread may push the change first; otherwise the final snapshot at stop must.
    assert sched.stop() in ("pushed", "unchanged")
    restored = Path(str(db) + ".check")
    restore(restored, remote)
    assert rows(restored) == rows(db)


def test_start_persistence_unset_repo_returns_none(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("CIR_DB_REPO", raising=False)
    with caplog.at_level(logging.INFO, logger="db.snapshot.scheduler"):
        assert start_persistence(db) is None
    assert "CIR_DB_REPO is not set" in caplog.text


def test_start_persistence_restores_and_does_not_repush(db: Path, remote: CountingRemote, tmp_path: Path) -> None:
    pushed_file(db, remote, tmp_path)
    target = tmp_path / "app" / "ann.sqlite"
    sched = start_persistence(target, remote=remote, start=False, every=60, keep=5)
    assert rows(target) == rows(db)
    connect_wal(target).close()  # the app opening it (WAL on) is not a change
    assert sched.tick() == "unchanged"
    conn = connect_wal(target)
    write_pair(conn, 3, 0)
    conn.close()
    assert sched.tick() == "pushed"
    assert sched.stop() == "unchanged"


def test_start_persistence_empty_remote_starts_empty_and_loudly(remote: CountingRemote, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    target = tmp_path / "ann.sqlite"
    with caplog.at_level(logging.ERROR):
        sched = start_persistence(target, remote=remote, start=False)
    assert "STARTS EMPTY" in caplog.text and not target.exists()
    assert sched.tick() == "no-db"
    make_db(target)
    assert sched.tick() == "pushed" and read_latest(remote)["row_counts"]["events"] == 3


def test_unreachable_at_start_never_moves_existing_pointer(db: Path, remote: CountingRemote,
                                                           tmp_path: Path) -> None:
    first = pushed_file(db, remote, tmp_path)
    remote.down = True
    target = make_db(tmp_path / "fresh.sqlite", n=0)
    target.unlink()
    sched = start_persistence(target, remote=remote, start=False)
    assert not target.exists()
    remote.down = False
    make_db(target, n=1)
    assert sched.tick() == "conflict"
    assert Path(read_latest(remote)["snapshot"]).name == first.name  # data not shadowed
    assert len(remote.list_files("conflicts/")) == 2


def test_env_validation(db: Path, remote: CountingRemote, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CIR_DB_SNAPSHOT_EVERY", "five minutes")
    with pytest.raises(InputError, match="CIR_DB_SNAPSHOT_EVERY"):
        start_persistence(db, remote=remote, start=False)
    with pytest.raises(InputError, match="interval"):
        SnapshotScheduler(db, remote, every=0)
    with pytest.raises(SnapshotError, match="owner/name"):
        remote_from_spec("just-a-name")


class FakeApi:
    """Records calls; the first commit fails with RepositoryNotFoundError if `missing`."""

    def __init__(self, missing: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.missing = missing

    def create_repo(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("create_repo", (repo_id, kw)))

    def create_commit(self, repo_id: str, ops: Any, **kw: Any) -> None:
        if self.missing:
            import httpx2
            from huggingface_hub import errors as hf

            self.missing = False
            raise hf.RepositoryNotFoundError("404", response=httpx2.Response(
                404, request=httpx2.Request("POST", "https://x")))
        self.calls.append(("create_commit", (repo_id, list(ops), kw)))

    def list_repo_files(self, repo_id: str, **kw: Any) -> list[str]:
        return ["latest.json", "snapshots/20250101T000000.000000Z.sqlite",
                "snapshots/20250101T000000.000000Z.json", "README.md"]


def test_hub_remote_one_commit_and_error_mapping(db: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, constants
    from huggingface_hub import errors as hf

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # conftest's setting, made explicit
    with pytest.raises(Unreachable, match="HF_HUB_OFFLINE"):
        Remote(HFStore(api=FakeApi()), "me/ann-db").download("latest.json")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # only fakes below: no network

    api = FakeApi(missing=True)
    hub = Remote(HFStore(token="tok", api=api, download_fn=lambda *a, **k: (_ for _ in ()).throw(
        hf.RemoteEntryNotFoundError("404", response=httpx2.Response(404, request=httpx2.Request("GET", "https://x"))))),
                 "me/ann-db")
    push(snapshot(db, tmp_path / "s"), hub, keep=1, expect_latest=None)
    (_, (repo, kw1)), (_, (repo2, ops, kw)) = api.calls
    assert repo == repo2 == "me/ann-db" and kw1["private"] and kw1["repo_type"] == "dataset"
    assert kw["repo_type"] == "dataset" and kw["token"] == "tok"
    adds = sorted(o.path_in_repo for o in ops if isinstance(o, CommitOperationAdd))
    dels = sorted(o.path_in_repo for o in ops if isinstance(o, CommitOperationDelete))
    assert adds[0] == "latest.json" and len(adds) == 3
    assert dels == ["snapshots/20250101T000000.000000Z.json", "snapshots/20250101T000000.000000Z.sqlite"]
    api.calls.clear()
    hub.upload({}, ["x"], "again")  # the repo exists now: no create_repo
    assert [c[0] for c in api.calls] == ["create_commit"]
    offline = Remote(HFStore(api=api, download_fn=lambda *a, **k: (_ for _ in ()).throw(
        hf.LocalEntryNotFoundError("offline"))), "me/ann-db")
    with pytest.raises(Unreachable, match="unreachable"):
        offline.download("latest.json")


def test_with_the_real_engine_and_schema(remote: CountingRemote, tmp_path: Path) -> None:
    try:
        from sqlalchemy import text

        from db.migrate import init_db
        from db.sqlite import open_db
    except Exception as e:  # noqa: BLE001 - the schema is being extended in parallel
        pytest.skip(f"db.engine/db.models do not import right now: {e}")
    path = tmp_path / "real.sqlite"
    engine = open_db(path)
    init_db(engine)
    sched = SnapshotScheduler(path, remote, every=3600)
    assert sched.tick() == "pushed"
    with engine.begin() as conn:  # BEGIN IMMEDIATE, as the app writes
        conn.execute(text("CREATE TABLE scratch (x INTEGER)"))
        conn.execute(text("INSERT INTO scratch VALUES (1)"))
    assert sched.tick() == "pushed"
    engine.dispose()
    sched.stop()
    target = tmp_path / "again.sqlite"
    restore(target, remote)
    engine2 = open_db(target)
    init_db(engine2)  # create_all on the restored file changes nothing
    with engine2.begin() as conn:
        assert conn.execute(text("SELECT x FROM scratch")).scalar_one() == 1
    engine2.dispose()
    assert SnapshotScheduler(target, remote, every=3600, last_sha=read_latest(remote)["sha256"]).tick() == "unchanged"


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGTERM"), reason="POSIX signals")
def test_sigterm_runs_the_final_snapshot(tmp_path: Path) -> None:
    """A stopped Space gets SIGTERM: the final snapshot must still be pushed (via atexit)."""
    import os
    import subprocess
    import sys

    script = (
        "import os, signal, sqlite3, sys, time\n"
        "from db.snapshot.scheduler import start_persistence\n"
        "s = start_persistence(sys.argv[1])\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA journal_mode=WAL'); c.execute('CREATE TABLE j (x)')\n"
        "c.execute('INSERT INTO j VALUES (1)'); c.close()\n"
        "os.kill(os.getpid(), signal.SIGTERM); time.sleep(30)\n"
    )
    env = {**os.environ, "CIR_DB_REPO": f"file://{tmp_path / 'repo'}", "CIR_DB_SNAPSHOT_EVERY": "3600",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a.sqlite")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143, proc.stderr
    assert read_latest(folder_remote(tmp_path / "repo"))["row_counts"] == {"j": 1}


def test_start_persistence_with_bad_snapshot_starts_empty(db: Path, remote: CountingRemote, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    bad = pushed_file(db, remote, tmp_path)
    bad.write_bytes(bad.read_bytes()[:100])
    target = tmp_path / "app" / "ann.sqlite"
    with caplog.at_level(logging.ERROR):
        sched = start_persistence(target, remote=remote, start=False)
    assert "STARTS EMPTY" in caplog.text and "bytes, expected" in caplog.text
    assert not target.exists() and sched is not None
