"""The annotation DB on PostgreSQL (`--db postgresql://...`, several app replicas on one server):
the same models and Alembic migrations, the backend-independent DB and queue tests of
test_db.py and test_queue.py run again on it, replicas claiming and answering concurrently, and
a small kill -9 stress run through db.serve. Needs a server: Debian's `postgresql` (a private
cluster is started in a temporary folder) or CIR_TEST_POSTGRES_URL; skipped, with the reason,
when neither is there (tests/_postgres.py)."""
from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from _postgres import Server, Unavailable
from sqlalchemy import create_engine, func, select

# The backend-independent tests, collected here a second time with this module's fixtures
# (`engine`, `S`) giving a fresh PostgreSQL database instead of a SQLite file.
from test_db import (  # noqa: F401
    test_db_rejects_half_answer_and_bad_gold,
    test_delete_task_with_judgments_refused,
    test_fk_to_missing_task_rejected,
    test_judgment_check_constraints,
    test_judgments_for_isolates_annotators,
    test_rank_check_constraint,
    test_repeating_the_same_write_is_a_no_op,
    test_skip_then_answer_keeps_history,
    test_skip_validation,
    test_unique_annotator_task_at_db_level,
    test_upsert_updates_and_audits,
    test_upsert_validates_before_db,
)
from test_queue import (  # noqa: F401
    cir_engine,
    test_gold_pairs_sit_anywhere_in_a_queue_at_the_sets_share,
    test_gold_tasks_carry_world_truth_and_never_make_a_queue_of_their_own,
    test_join_back_counts_a_judgment_for_every_method_that_retrieved_the_item,
    test_order_groups_each_query_and_differs_between_annotators,
    test_overlap_gives_each_task_to_n_annotators,
    test_pool_refuses_bad_input_and_writes_nothing,
    test_pool_stores_every_method_and_distinct_tasks,
    test_queue_resumes_and_orders_per_annotator,
    test_skip_back_and_privacy,
)

from db.migrate import head, init_db
from db.sqlite import db_url, open_db, session_factory


@pytest.fixture(scope="module")
def pg():
    server = Server()
    try:
        server.start()
    except (Unavailable, OSError) as exc:
        server.stop()
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server
    server.stop()


def _drop(pg: Server, url: str) -> None:
    admin = create_engine(db_url(pg.admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{db_url(url).database}" WITH (FORCE)')
    finally:
        admin.dispose()


@pytest.fixture()
def pg_url(pg):
    url = pg.new_database()
    yield url
    _drop(pg, url)


@pytest.fixture()
def engine(pg_url):
    eng = open_db(pg_url)
    init_db(eng)
    yield eng
    eng.dispose()


@pytest.fixture()
def S(engine):
    return session_factory(engine)


def test_migrations_build_the_models_schema(pg_url) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from db import migrate
    from db.models import Base

    eng = open_db(pg_url)
    try:
        assert eng.dialect.name == "postgresql"
        init_db(eng)
        init_db(eng)  # idempotent
        assert migrate.current(pg_url) == head()
        with eng.connect() as conn:
            mc = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(mc, Base.metadata) == []
    finally:
        eng.dispose()


def test_commits_wait_for_the_wal_flush(pg_url, caplog) -> None:
    """Issue 27: a database configured with synchronous_commit=off would acknowledge answers an
    OS crash can still take; the app's connections set it back to on (and say so once)."""
    import logging

    admin = create_engine(db_url(pg_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'ALTER DATABASE "{db_url(pg_url).database}" SET synchronous_commit = off')
    admin.dispose()
    eng = open_db(pg_url)
    try:
        with caplog.at_level(logging.WARNING, logger="db.postgres"):
            for _ in range(2):
                with eng.connect() as c:
                    assert c.exec_driver_sql("SHOW synchronous_commit").scalar() == "on"
                eng.dispose()  # a new connection next time
        assert caplog.text.count("synchronous_commit=off") == 1
        assert "fsync=off" in caplog.text  # the test cluster runs without fsync, and it is said
    finally:
        eng.dispose()


def test_annotation_service_on_postgres(pg_url, cir_engine) -> None:
    from db.export import export_rows
    from db.judgments import StaleAnswer
    from db.models import JudgmentAudit
    from db.report import compute_report
    from db.service import DEFAULT_SET, AnnotationService

    svc = AnnotationService(pg_url)
    try:
        assert svc.ensure_default_set(cir_engine) == DEFAULT_SET
        st = svc.open("alice", DEFAULT_SET)
        first = st.task.task_id
        st = svc.answer("alice", DEFAULT_SET, first, "yes", "partial")
        assert st.task.position == 2 and st.progress.done == 1
        again = svc.answer("alice", DEFAULT_SET, first, "yes", "partial")  # a retried request
        assert again.task.task_id == st.task.task_id
        svc.answer("alice", DEFAULT_SET, first, "no", "no")  # a change: audited
        with svc.Session() as s:
            assert s.scalar(select(func.count()).select_from(JudgmentAudit)) == 1
        back = svc.open("alice", DEFAULT_SET, 1)
        assert (back.task.identity, back.task.edit) == ("no", "no")
        with pytest.raises(PermissionError):
            svc.answer("bob", DEFAULT_SET, first, "yes", "yes")  # not in bob's queue
        svc.skip("alice", DEFAULT_SET, st.task.task_id, "other")
        with svc.ReadSession() as s:
            rep = compute_report(s, DEFAULT_SET, n_boot=50)
            assert rep["judgments"]["answered"] == 1 and rep["judgments"]["skipped"] == 1
            assert len(export_rows(s, annotator="alice")) == 2
        assert svc.current_set("alice") == DEFAULT_SET
        # Issue 42: a NUL in a comment is named before PostgreSQL sees it (it used to answer
        # only "database refused the request"); a save from a stale tab is refused.
        st = svc.open("carol", DEFAULT_SET)
        with pytest.raises(ValueError, match="U\\+0000"):
            svc.answer("carol", DEFAULT_SET, st.task.task_id, "yes", "no", comment="a\x00b")
        svc.answer("carol", DEFAULT_SET, st.task.task_id, "yes", "no", expected=None)
        with pytest.raises(StaleAnswer):
            svc.answer("carol", DEFAULT_SET, st.task.task_id, "no", "no", expected=None)
    finally:
        svc.close()


def test_replicas_share_one_database(pg_url, cir_engine) -> None:
    """Two app replicas (two services on one database), eight annotators in threads, two of
    them signed in on both replicas at once: every claim respects the overlap, every queue's
    positions are 1..n without gaps or doubles, no write fails."""
    from db.models import Assignment, Judgment, Task
    from db.pooling import pool_query_set, world_queries
    from db.service import AnnotationService

    replicas = [AnnotationService(pg_url), AnnotationService(pg_url)]
    with replicas[0].Session() as s:
        pool_query_set(s, cir_engine, "shared", world_queries(cir_engine, 4), ["pact", "sum"], k=3,
                       overlap=2, gold_fraction=0.0)
    errors: list[BaseException] = []

    def annotate(name: str, svc: AnnotationService, n: int) -> None:
        try:
            st = svc.open(name, "shared")
            for i in range(n):
                if st.task is None:
                    return
                if i % 5 == 4:
                    st = svc.skip(name, "shared", st.task.task_id, "other")
                else:
                    st = svc.answer(name, "shared", st.task.task_id, "yes", "no")
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=annotate, args=(f"ann{i}", replicas[i % 2], 12)) for i in range(8)]
    threads += [threading.Thread(target=annotate, args=(f"ann{i}", replicas[(i + 1) % 2], 12)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        with replicas[0].Session() as s:
            holders = Counter(s.scalars(select(Assignment.task_id)))
            assert max(holders.values()) <= 2  # overlap 2, no gold
            rows = s.execute(select(Assignment.annotator_id, Assignment.position)).all()
            by_ann: dict[int, list[int]] = {}
            for a, p in rows:
                by_ann.setdefault(a, []).append(p)
            for positions in by_ann.values():
                assert sorted(positions) == list(range(1, len(positions) + 1))
            assert s.scalar(select(func.count()).select_from(Judgment)) > 0
            n_tasks = s.scalar(select(func.count()).select_from(Task))
            assert sum(holders.values()) <= 2 * n_tasks
    finally:
        for r in replicas:
            r.close()


def test_kill9_stress_on_postgres(pg_url, tmp_path: Path) -> None:
    from db.stress import StressConfig, run_stress
    from db.stress_verify import verify

    cfg = StressConfig(clients=4, per_client=8, revisions=2, kill_at=0.5, down_s=0.3, think_ms=20,
                       progress=False)
    res = run_stress(cfg, pg_url, log=tmp_path / "server.log")
    assert res.failures == [] and len(res.acks) == res.planned == 4 * 10
    assert 0 < res.acked_at_kill < res.planned and any(a.t_ack > res.t_kill for a in res.acks)
    v = verify(pg_url, res.acks)
    assert (v.lost, v.duplicated, v.stale) == ([], [], [])
    assert v.rows == v.acked_keys == 32
    assert v.integrity == ["n/a"] and v.fk_violations == 0 and v.unique_constraint == "held"


def test_review_pause_and_pairwise_on_postgres(pg_url, cir_engine) -> None:
    """Issue 45 on PostgreSQL: the new columns and tables, two reviewers deciding one pair at the
    same moment (one decision stands, the other is told), a pause returning pairs to the pool,
    a pairwise set answered and reported."""
    from db.judgments import StaleAnswer
    from db.models import Adjudication
    from db.pooling import pool_pairwise, pool_query_set, world_queries
    from db.queue import Paused
    from db.report import compute_report
    from db.service import AnnotationService
    from db.users import Roles

    roles = Roles(reviewers=frozenset({"rev1", "rev2"}), organisers=frozenset({"org"}))
    svc, other = AnnotationService(pg_url, roles=roles), AnnotationService(pg_url, roles=roles)
    try:
        with svc.Session() as s:
            pool_query_set(s, cir_engine, "pt", world_queries(cir_engine, 3), ["pact", "sum"], k=2, overlap=2,
                           questions=["relevance"])
            pool_pairwise(s, cir_engine, "pw", world_queries(cir_engine, 3), [("pact", "cosine"), ("dice", "chord")],
                          k=2)
        for who, ans in (("a1", ("yes", "yes", "3")), ("a2", ("no", "yes", "0"))):
            st = svc.open(who, "pt")
            while st.task is not None:
                st = svc.answer(who, "pt", st.task.task_id, answers=dict(zip(("identity", "edit", "relevance"), ans)))
        task = svc.review_open("rev1", "pt").task.task_id
        results: list = []
        barrier = threading.Barrier(2)

        def decide(service: AnnotationService, who: str) -> None:
            barrier.wait()
            try:
                service.adjudicate(who, "pt", task, {"identity": "yes", "edit": "yes", "relevance": "2"}, move_on=False)
                results.append("decided")
            except StaleAnswer:
                results.append("stale")

        threads = [threading.Thread(target=decide, args=(s_, w)) for s_, w in ((svc, "rev1"), (other, "rev2"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == ["decided", "stale"]
        with svc.ReadSession() as s:
            assert s.scalar(select(func.count()).select_from(Adjudication)) == 1
            rep = compute_report(s, "pt", n_boot=50)
        assert rep["review"]["adjudicated"] == 1 and rep["review"]["open_ties"] > 0 and "relevance" in rep["agreement"]
        svc.set_paused("org", "a1", True)
        with pytest.raises(Paused):
            svc.open("a1", "pt")
        st, n = svc.open("a3", "pt"), 0
        while st.task is not None:  # a1's pairs are back in the pool (overlap 2: a2 and a3 now)
            st = svc.answer("a3", "pt", st.task.task_id, answers={"identity": "yes", "edit": "no", "relevance": "1"})
            n += 1
        assert n > 0
        st = svc.open("a3", "pw")
        assert st.task.item_b_id and [q.name for q in st.questions] == ["preference"]
        while st.task is not None:
            st = svc.answer("a3", "pw", st.task.task_id, answers={"preference": "both"})
        with svc.ReadSession() as s:
            pw = compute_report(s, "pw", n_boot=50)["pairwise"]
        assert pw["pairs"] and all(p["raw"]["both"]["mean"] in (None, 1.0) for p in pw["pairs"])
    finally:
        svc.close()
        other.close()
