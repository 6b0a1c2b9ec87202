"""The stress property in small: 4 annotators x 12 writes through db.serve, one kill -9 mid-run,
no acknowledged write lost, duplicated or stale; and the checker catches each kind of damage."""
from __future__ import annotations

import importlib.util
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from db.judgments import upsert_judgment
from db.sqlite import open_db, session_factory
from db.stress import StressConfig, run_stress, seed_db
from db.stress_verify import verify

ROOT = Path(__file__).resolve().parents[1]


def _bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("stress_annotation",
                                                  ROOT / "bench" / "stress_annotation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kill9_mid_run_loses_nothing(tmp_path: Path) -> None:
    cfg = StressConfig(clients=4, per_client=10, revisions=2, kill_at=0.5, down_s=0.3,
                       think_ms=30, progress=False)
    res = run_stress(cfg, tmp_path / "stress.sqlite")
    assert res.failures == []
    assert len(res.acks) == res.planned == 4 * 12
    # The kill landed mid-run: writes were acknowledged both before it and after the restart.
    assert 0 < res.acked_at_kill < res.planned
    assert any(a.t_ack > res.t_kill for a in res.acks)
    v = verify(tmp_path / "stress.sqlite", res.acks)
    assert (v.lost, v.duplicated, v.stale) == ([], [], [])
    assert v.rows == v.acked_keys == 40
    assert v.integrity == ["ok"] and v.unique_constraint == "held"
    assert v.reapplied >= 0
    text = _bench_module().report(cfg, res, v)
    assert text.rstrip().endswith("RESULT: PASS")


@dataclass
class _Ack:
    annotator_id: int
    task_id: int
    payload: dict[str, Any]


def _payload(a: int, t: int, comment: str, ms: int = 100) -> dict[str, Any]:
    return {"annotator_id": a, "task_id": t, "identity": "yes", "edit": "no", "comment": comment,
            "time_spent_ms": ms, "shown_position": 1}


def test_verify_catches_lost_stale_and_reapplied(tmp_path: Path) -> None:
    db = tmp_path / "v.sqlite"
    (a0, (t0, t1)), (a1, (t2, _)) = seed_db(db, clients=2, per_client=2)
    eng = open_db(db)
    with session_factory(eng)() as s:
        upsert_judgment(s, a0, t0, "yes", "no", comment="kept", time_spent_ms=100, shown_position=1)
        upsert_judgment(s, a1, t2, "yes", "no", comment="old", time_spent_ms=100, shown_position=1)
        # A retry of an already committed write is a no-op in upsert_judgment ...
        upsert_judgment(s, a1, t2, "yes", "no", comment="old", time_spent_ms=100, shown_position=1)
        s.commit()
    eng.dispose()
    acks0 = [_Ack(a0, t0, _payload(a0, t0, "kept")), _Ack(a1, t2, _payload(a1, t2, "old"))]
    v = verify(db, acks0)
    assert (v.reapplied, v.time_inflated_rows, v.time_inflated_ms) == (0, 0, 0) and v.ok
    # ... so fake what a re-applying writer would leave (an audit row, the time counted twice)
    # to check that the verifier still catches it.
    con = sqlite3.connect(db)
    jid = con.execute("SELECT id FROM judgments WHERE annotator_id=? AND task_id=?", (a1, t2)).fetchone()[0]
    con.execute("UPDATE judgments SET time_spent_ms = time_spent_ms + 100 WHERE id = ?", (jid,))
    con.execute("INSERT INTO judgment_audits (judgment_id, status, identity, edit, comment, changed_at) "
                "VALUES (?, 'answered', 'yes', 'no', 'old', '2026-01-01')", (jid,))
    con.commit()
    con.close()
    acks = [_Ack(a0, t0, _payload(a0, t0, "kept")),
            _Ack(a0, t1, _payload(a0, t1, "never stored")),
            _Ack(a1, t2, _payload(a1, t2, "old"))]
    v = verify(db, acks)
    assert v.lost == [(a0, t1)] and v.stale == [] and v.duplicated == []
    assert (v.reapplied, v.time_inflated_rows, v.time_inflated_ms) == (1, 1, 100)
    assert not v.ok
    # The same DB, but the client saw a later value for (a1, t2) acknowledged: stale.
    acks[2] = _Ack(a1, t2, _payload(a1, t2, "newer"))
    v = verify(db, acks[::2])
    assert len(v.stale) == 1 and "newer" in v.stale[0] and v.lost == []


def test_verify_catches_duplicates_without_unique(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    ((a0, (t0,)),) = seed_db(db, clients=1, per_client=1)
    con = sqlite3.connect(db)
    # A judgments table with no constraints at all (what CREATE TABLE AS gives), two rows per pair.
    con.executescript(
        "ALTER TABLE judgments RENAME TO j_old; CREATE TABLE judgments AS SELECT * FROM j_old;")
    for comment in ("one", "two"):
        con.execute("INSERT INTO judgments (id, annotator_id, task_id, status, identity, edit, "
                    "comment, time_spent_ms, shown_position) VALUES (NULL, ?, ?, 'answered', "
                    "'yes', 'no', ?, 100, 1)", (a0, t0, comment))
    con.commit()
    con.close()
    v = verify(db, [_Ack(a0, t0, _payload(a0, t0, "two"))])
    assert v.duplicated == [(a0, t0)]
    assert v.unique_constraint == "MISSING from the schema"
    assert not v.ok
