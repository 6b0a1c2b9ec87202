"""Annotation DB: pragmas, constraints, RESTRICT deletes, audited upserts, concurrent writers."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.judgments import judgments_for, upsert_judgment
from db.migrate import init_db
from db.models import (
    Annotator,
    Judgment,
    JudgmentAudit,
    Query,
    QuerySet,
    RetrievedItem,
    Task,
)
from db.sqlite import open_db, session_factory


@pytest.fixture()
def engine(tmp_path: Path) -> Engine:
    eng = open_db(tmp_path / "ann.sqlite")
    init_db(eng)
    yield eng
    eng.dispose()


def _seed(session: Session, n_tasks: int = 2, n_annotators: int = 2) -> tuple[list[int], list[int]]:
    """A query set with one query, `n_tasks` tasks and `n_annotators` annotators; returns ids."""
    qs = QuerySet(name="qs", source="world:test")
    q = Query(query_set=qs, external_id="q0", reference_id="ref0", edit_text="make it red", meta={"k": 1})
    tasks = [Task(query=q, item_id=f"item{i}") for i in range(n_tasks)]
    anns = [Annotator(name=f"ann{i}") for i in range(n_annotators)]
    session.add_all([qs, q, *tasks, *anns])
    session.commit()
    return [a.id for a in anns], [t.id for t in tasks]


def test_pragmas_on_every_connection(engine: Engine) -> None:
    # Two raw DBAPI connections held at once are necessarily distinct; raw checkouts skip the
    # BEGIN IMMEDIATE event, which would otherwise make the second one wait on the first's lock.
    c1, c2 = engine.raw_connection(), engine.raw_connection()
    try:
        assert c1.dbapi_connection is not c2.dbapi_connection
        for c in (c1, c2):
            cur = c.cursor()
            assert cur.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert cur.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert cur.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
            # FULL: a commit returns after the WAL is fsynced (durable past an OS crash)
            assert cur.execute("PRAGMA synchronous").fetchone()[0] == 2
            cur.close()
    finally:
        c1.close()
        c2.close()


def test_a_foreign_sqlite_file_is_refused_unchanged(tmp_path: Path) -> None:
    """Issue 27: a SQLite file of something else given as --db is refused, and left byte for
    byte as it was (it used to be switched to WAL before the refusal), with no -wal/-shm."""
    import hashlib
    import sqlite3

    from db.migrate import SchemaError
    from db.service import AnnotationService

    f = tmp_path / "notes.sqlite"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES ('mine')")
    con.commit()
    con.close()
    before = hashlib.sha256(f.read_bytes()).hexdigest()
    with pytest.raises(SchemaError, match="schema differs"):
        AnnotationService(f)
    assert hashlib.sha256(f.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite"]
    con = sqlite3.connect(f)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


@pytest.mark.parametrize(
    "field,value",
    [("identity", "maybe"), ("edit", "kinda"), ("time_spent_ms", -1)],
)
def test_judgment_check_constraints(engine: Engine, field: str, value: object) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        row = dict(annotator_id=a, task_id=t, identity="yes", edit="no", time_spent_ms=0, shown_position=0)
        row[field] = value
        s.add(Judgment(**row))
        with pytest.raises(IntegrityError):
            s.commit()


def test_rank_check_constraint(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        _seed(s)
        q = s.scalars(select(Query)).one()
        s.add(RetrievedItem(query_id=q.id, method="m", scoring="s", rank=0, item_id="x", score=0.1))
        with pytest.raises(IntegrityError):
            s.commit()


def test_unique_annotator_task_at_db_level(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        s.add(Judgment(annotator_id=a, task_id=t, identity="yes", edit="yes"))
        s.commit()
        s.add(Judgment(annotator_id=a, task_id=t, identity="no", edit="no"))
        with pytest.raises(IntegrityError):
            s.commit()


def test_fk_to_missing_task_rejected(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), _ = _seed(s)
        s.add(Judgment(annotator_id=a, task_id=99999, identity="yes", edit="yes"))
        with pytest.raises(IntegrityError):
            s.commit()


def test_delete_task_with_judgments_refused(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        upsert_judgment(s, a, t, "yes", "partial")
        s.commit()
        # Core delete: bypasses ORM relationship handling, so only the DB's RESTRICT stops it.
        with pytest.raises(IntegrityError):
            s.execute(delete(Task).where(Task.id == t))
        s.rollback()
    with S() as s:
        assert s.get(Task, t) is not None
        assert len(judgments_for(s, a)) == 1


def test_upsert_updates_and_audits(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        j1 = upsert_judgment(s, a, t, "yes", "partial", comment="first", time_spent_ms=1200, shown_position=3)
        s.commit()
        j2 = upsert_judgment(s, a, t, "cant_tell", "no", comment="second", time_spent_ms=800)
        s.commit()
        assert j1.id == j2.id
    with S() as s:
        j = s.scalars(select(Judgment)).one()
        # A revisit adds its time: 1200 + 800 ms were spent on this task in all.
        assert (j.identity, j.edit, j.comment, j.time_spent_ms) == ("cant_tell", "no", "second", 2000)
        audits = s.scalars(select(JudgmentAudit)).all()
        assert len(audits) == 1
        assert (audits[0].judgment_id, audits[0].identity, audits[0].edit, audits[0].comment) == (
            j.id, "yes", "partial", "first",
        )


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(identity="maybe", edit="yes"), "identity"),
        (dict(identity="yes", edit="mostly"), "edit"),
        (dict(identity="yes", edit="yes", time_spent_ms=-5), "time_spent_ms"),
    ],
)
def test_upsert_validates_before_db(engine: Engine, kwargs: dict, field: str) -> None:
    S = session_factory(engine)
    with S() as s:
        # Nonexistent ids: if validation didn't run first, we'd see an IntegrityError instead.
        with pytest.raises(ValueError, match=field):
            upsert_judgment(s, 1, 1, **kwargs)
        assert s.scalars(select(Judgment)).all() == []


def test_judgments_for_isolates_annotators(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, b), (t0, t1) = _seed(s)
        upsert_judgment(s, a, t0, "yes", "yes")
        upsert_judgment(s, a, t1, "no", "no")
        upsert_judgment(s, b, t0, "cant_tell", "partial")
        s.commit()
        assert {j.task_id for j in judgments_for(s, a)} == {t0, t1}
        mine = judgments_for(s, b)
        assert [(j.annotator_id, j.task_id, j.identity) for j in mine] == [(b, t0, "cant_tell")]


def test_concurrent_writers_two_engines(tmp_path: Path) -> None:
    path = tmp_path / "ann.sqlite"
    e1, e2 = open_db(path), open_db(path)
    init_db(e1)
    n_threads, per_thread = 4, 25
    with session_factory(e1)() as s:
        (a,), task_ids = _seed(s, n_tasks=n_threads * per_thread, n_annotators=1)
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def worker(k: int) -> None:
        S = session_factory(e1 if k % 2 == 0 else e2)
        try:
            barrier.wait()
            for tid in task_ids[k * per_thread:(k + 1) * per_thread]:
                with S() as s:
                    # Read-then-write inside one txn: the case BEGIN IMMEDIATE protects.
                    upsert_judgment(s, a, tid, "yes", "partial", time_spent_ms=k)
                    s.commit()
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert errors == []
    with e2.connect() as c:
        assert c.execute(text("SELECT count(*) FROM judgments")).scalar() == n_threads * per_thread
        assert c.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    e1.dispose()
    e2.dispose()


def test_begin_takes_write_lock(engine: Engine) -> None:
    # Even a read-only transaction holds the write lock, proving BEGIN IMMEDIATE was emitted.
    with engine.connect() as c:
        c.execute(text("SELECT 1"))
        assert c.in_transaction()
        other = engine.raw_connection()
        try:
            cur = other.cursor()
            cur.execute("PRAGMA busy_timeout=0")  # fail fast instead of waiting 5 s
            with pytest.raises(Exception, match="locked"):
                cur.execute("BEGIN IMMEDIATE")
        finally:
            other.close()


def test_skip_then_answer_keeps_history(engine: Engine) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        j = upsert_judgment(s, a, t, None, None, skip_reason="image too dark")
        s.commit()
        assert (j.status, j.identity, j.edit, j.skip_reason) == ("skipped", None, None, "image too dark")
        upsert_judgment(s, a, t, "yes", "yes")
        s.commit()
    with S() as s:
        j = s.scalars(select(Judgment)).one()
        assert (j.status, j.identity, j.skip_reason) == ("answered", "yes", None)
        (audit,) = s.scalars(select(JudgmentAudit)).all()
        assert (audit.status, audit.skip_reason) == ("skipped", "image too dark")


@pytest.mark.parametrize("kwargs, msg", [
    (dict(identity="yes", edit=None, skip_reason="x"), "no identity/edit"),
    (dict(identity=None, edit=None, skip_reason="  "), "non-empty reason"),
    (dict(identity=None, edit="yes"), "identity must be"),
])
def test_skip_validation(engine: Engine, kwargs: dict, msg: str) -> None:
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        with pytest.raises(ValueError, match=msg):
            upsert_judgment(s, a, t, **kwargs)


def test_db_rejects_half_answer_and_bad_gold(engine: Engine) -> None:
    """The CHECK constraints hold even for writes that bypass upsert_judgment's validation."""
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        s.add(Judgment(annotator_id=a, task_id=t, status="answered", identity="yes", edit=None))
        with pytest.raises(IntegrityError):
            s.commit()
    with S() as s:
        s.add(Judgment(annotator_id=a, task_id=t, status="skipped", skip_reason=None))
        with pytest.raises(IntegrityError):
            s.commit()
    with S() as s:
        task = s.get(Task, t)
        task.gold_identity = "maybe"
        with pytest.raises(IntegrityError):
            s.commit()


def test_repeating_the_same_write_is_a_no_op(engine: Engine) -> None:
    """A retried request (reply lost after the commit) must not add time or an audit row."""
    S = session_factory(engine)
    with S() as s:
        (a, _), (t, _) = _seed(s)
        upsert_judgment(s, a, t, "yes", "no", comment="c", time_spent_ms=500)
        s.commit()
        upsert_judgment(s, a, t, "yes", "no", comment="c", time_spent_ms=500)
        s.commit()
        j = s.scalars(select(Judgment)).one()
        assert j.time_spent_ms == 500
        assert s.scalars(select(JudgmentAudit)).all() == []
