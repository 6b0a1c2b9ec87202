"""Pooling (every method's top-k → distinct tasks, join back to methods) and the annotator queue
(own random order, resume, overlap, gold, skip, back/undo, privacy)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _cir_fakes import fake_trained_methods, make_test_engine
from sqlalchemy import func, select

from db import queue
from db.migrate import init_db
from db.models import Assignment, JudgmentAudit, Query, QuerySet, RetrievedItem, Task
from db.pooling import PoolQuery, pool_query_set, world_queries
from db.results import item_scores, load_set
from db.sqlite import open_db as make_db
from db.sqlite import session_factory

METHODS = ["pact", "dice", "sum"]


@pytest.fixture(scope="module")
def cir_engine():
    with fake_trained_methods():
        yield make_test_engine()


@pytest.fixture()
def S(tmp_path: Path):
    eng = make_db(tmp_path / "ann.sqlite")
    init_db(eng)
    yield session_factory(eng)
    eng.dispose()


def _pool(S, cir_engine, name="demo", n=4, k=3, overlap=1, gold=0.0):
    with S() as s:
        return pool_query_set(s, cir_engine, name, world_queries(cir_engine, n), METHODS, k=k,
                              overlap=overlap, gold_fraction=gold).id


def test_pool_stores_every_method_and_distinct_tasks(S, cir_engine) -> None:
    _pool(S, cir_engine, n=4, k=3)
    with S() as s:
        retrieved = s.scalars(select(RetrievedItem)).all()
        assert len(retrieved) == 4 * len(METHODS) * 2 * 3  # queries × methods × scorings × k
        by_query: dict[int, set[str]] = {}
        for r in retrieved:
            by_query.setdefault(r.query_id, set()).add(r.item_id)
        tasks = s.scalars(select(Task)).all()
        assert len(tasks) == sum(len(v) for v in by_query.values())  # each distinct item once
        assert {(t.query_id, t.item_id) for t in tasks} == {(q, i) for q, v in by_query.items() for i in v}


def test_pool_refuses_bad_input_and_writes_nothing(S, cir_engine) -> None:
    qs = world_queries(cir_engine, 2)
    with S() as s:
        with pytest.raises(ValueError, match="k must be"):
            pool_query_set(s, cir_engine, "x", qs, METHODS, k=0)
        with pytest.raises(ValueError, match="unique"):
            pool_query_set(s, cir_engine, "x", qs + qs[:1], METHODS)
        with pytest.raises(ValueError, match="do not load"):
            pool_query_set(s, cir_engine, "x", qs, ["no-such-method"])
        bad = [PoolQuery("q", "not-an-item", "make it red")]
        with pytest.raises(Exception, match="not-an-item"):
            pool_query_set(s, cir_engine, "x", bad, METHODS)
    with S() as s:
        assert s.scalar(select(func.count()).select_from(Task)) == 0
    _pool(S, cir_engine, name="dup", n=1)
    with S() as s, pytest.raises(ValueError, match="already exists"):
        pool_query_set(s, cir_engine, "dup", qs, METHODS)


def test_join_back_counts_a_judgment_for_every_method_that_retrieved_the_item(S, cir_engine) -> None:
    qs_id = _pool(S, cir_engine, n=2, k=3)
    with S() as s:
        ann = queue.get_or_create_annotator(s, "alice")
        qs = s.get(QuerySet, qs_id)
        view = queue.current(s, ann, qs)
        queue.answer(s, ann, view.task_id, "yes", "partial")
        task = s.get(Task, view.task_id)
        who = {(r.method, r.scoring) for r in s.scalars(select(RetrievedItem).where(
            RetrievedItem.query_id == task.query_id, RetrievedItem.item_id == task.item_id))}
        # The join the report uses (db/results.py): a judged item counts for every retriever.
        data = load_set(s, qs.name)
    retrievers = {combo for combo, by_query in data.rankings.items()
                  if task.item_id in by_query.get(task.query_id, {}).values()}
    assert retrievers == who and data.task_of[(task.query_id, task.item_id)] == task.id  # no one else
    scores = item_scores(data.judgments)
    assert set(scores) == {task.id}
    assert (scores[task.id]["identity"], scores[task.id]["edit"]) == (1.0, 0.5)


def test_queue_resumes_and_orders_per_annotator(S, cir_engine) -> None:
    _pool(S, cir_engine, n=4, k=3)
    with S() as s:
        qs = queue.query_set_by_name(s, "demo")
        a, b = queue.get_or_create_annotator(s, "alice"), queue.get_or_create_annotator(s, "bob")
        first = queue.current(s, a, qs)
        # A refresh (a new call, a new session) shows the same unanswered task.
        assert queue.current(s, a, qs).task_id == first.task_id
    with S() as s:
        a = queue.get_or_create_annotator(s, "alice")
        assert queue.current(s, a, qs).task_id == first.task_id
        order_a = [first.task_id]
        for _ in range(5):
            v = queue.current(s, a, qs)
            queue.answer(s, a, v.task_id, "no", "no", time_spent_ms=10)
            order_a.append(queue.current(s, a, qs).task_id)
        assert [v.position for v in (queue.at_position(s, a, qs, i) for i in (1, 2, 3))] == [1, 2, 3]
        assert queue.progress(s, a, qs).done == 5
        # Bob (overlap 1) never gets what Alice holds, and walks his own order.
        b = queue.get_or_create_annotator(s, "bob")
        got_b = []
        while (v := queue.current(s, b, qs)) is not None and len(got_b) < 5:
            got_b.append(v.task_id)
            queue.answer(s, b, v.task_id, "yes", "yes")
        assert not set(got_b) & set(order_a)


def test_overlap_gives_each_task_to_n_annotators(S, cir_engine) -> None:
    _pool(S, cir_engine, n=2, k=2, overlap=2)
    with S() as s:
        qs = queue.query_set_by_name(s, "demo")
        n_tasks = s.scalar(select(func.count()).select_from(Task))
        seen = {}
        for name in ("a1", "a2", "a3"):
            ann = queue.get_or_create_annotator(s, name)
            while (v := queue.current(s, ann, qs)) is not None:
                seen.setdefault(v.task_id, []).append(name)
                queue.answer(s, ann, v.task_id, "yes", "no")
        assert sum(len(v) for v in seen.values()) == 2 * n_tasks
        assert all(len(v) == 2 for v in seen.values())


def test_gold_tasks_carry_world_truth_and_never_make_a_queue_of_their_own(S, cir_engine) -> None:
    """Gold answers are the world's truth; gold pairs are spread among the plain ones, so an
    annotator who arrives when every plain pair is taken gets nothing, not a queue of gold
    pairs (issue 42: with gold going to everyone, a late arrival's queue was all gold)."""
    _pool(S, cir_engine, n=3, k=3, overlap=1, gold=0.5)
    with S() as s:
        gold = s.scalars(select(Task).where(Task.gold_identity.is_not(None))).all()
        assert gold and all(t.gold_edit in ("yes", "no") for t in gold)
        bench = cir_engine.view.bench
        row = {it.item_id: i for i, it in enumerate(bench.items)}
        for t in gold:  # identity truth = the same character as the reference
            q = s.get(Query, t.query_id)
            same = bench.identities()[row[t.item_id]] == bench.identities()[row[q.reference_id]]
            assert t.gold_identity == ("yes" if same else "no")
        qs = queue.query_set_by_name(s, "demo")
        n_plain = s.scalar(select(func.count()).select_from(Task).where(Task.gold_identity.is_(None)))
        got = {}
        for name in ("early", "late"):
            ann = queue.get_or_create_annotator(s, name)
            got[name] = []
            while (v := queue.current(s, ann, qs)) is not None:
                got[name].append(v.task_id)
                queue.answer(s, ann, v.task_id, "yes", "yes")
        gold_ids = {t.id for t in gold}
        assert len([t for t in got["early"] if t not in gold_ids]) == n_plain  # every plain pair
        assert got["late"] == []  # overlap 1 and nothing plain left: no gold-only queue


def _hand_set(S, n_queries: int, per_query: int, gold_every: int, overlap: int) -> tuple[str, set[int]]:
    """A set pooled by hand: n_queries x per_query tasks, every gold_every-th task gold."""
    with S() as s:
        qs = QuerySet(name="hand", source="test", overlap=overlap, pool_k=per_query)
        s.add(qs)
        k = 0
        for qi in range(n_queries):
            q = Query(query_set=qs, external_id=f"q{qi}", reference_id=f"r{qi}", edit_text="e")
            s.add(q)
            for j in range(per_query):
                k += 1
                gold = k % gold_every == 0
                s.add(Task(query=q, item_id=f"i{qi}-{j}", gold_identity="yes" if gold else None))
        s.commit()
        return qs.name, set(s.scalars(select(Task.id).where(Task.gold_identity.is_not(None))))


def test_gold_pairs_sit_anywhere_in_a_queue_at_the_sets_share(S) -> None:
    """40 annotators' whole queues over a set of 40 queries x 10 items, 10 % gold: the gold
    pairs are about 10 % of each queue, as often in its first half as in its second, never in
    a long run, and at different places for each annotator (a keyed draw per position). The
    queues are the projections `open_tasks` makes for a new annotator; a real walk follows its
    projection exactly (checked for two annotators)."""
    name, gold = _hand_set(S, 40, 10, 10, overlap=40)
    shares, first_half, second_half, places = [], 0, 0, set()
    with S() as s:
        qs = queue.query_set_by_name(s, name)
        for a in range(40):
            ann = queue.get_or_create_annotator(s, f"ann{a}")
            seq = [t in gold for t in queue.open_tasks(s, ann, qs, queue.own_queue(s, ann, qs))]
            assert sum(1 for g in seq if not g) == 360  # every plain pair
            shares.append(sum(seq) / len(seq))
            half = len(seq) // 2
            first_half, second_half = first_half + sum(seq[:half]), second_half + sum(seq[half:])
            run = max(len(r) for r in "".join("g" if g else "." for g in seq).split("."))
            assert run <= 5
            places.add(tuple(i for i, g in enumerate(seq) if g))
        for a in range(2):
            ann = queue.get_or_create_annotator(s, f"ann{a}")
            projected = queue.open_tasks(s, ann, qs, queue.own_queue(s, ann, qs))[:60]
            walked = []
            for _ in range(60):
                v = queue.current(s, ann, qs)
                walked.append(v.task_id)
                queue.answer(s, ann, v.task_id, "yes", "yes")
            assert walked == projected
    assert 0.07 < float(np.mean(shares)) < 0.12 and max(shares) < 0.2
    assert abs(first_half - second_half) < 4 * np.sqrt(first_half + second_half)
    assert len(places) == 40


def test_skip_back_and_privacy(S, cir_engine) -> None:
    _pool(S, cir_engine, n=2, k=2)
    with S() as s:
        qs = queue.query_set_by_name(s, "demo")
        a, b = queue.get_or_create_annotator(s, "alice"), queue.get_or_create_annotator(s, "bob")
        v1 = queue.current(s, a, qs)
        queue.skip(s, a, v1.task_id, "reference too small")
        v2 = queue.current(s, a, qs)
        assert v2.task_id != v1.task_id and v2.position == 2
        back = queue.at_position(s, a, qs, v2.position - 1)
        assert (back.task_id, back.status, back.skip_reason) == (v1.task_id, "skipped", "reference too small")
        changed = queue.answer(s, a, v1.task_id, "yes", "partial", comment="looked again")
        assert (changed.status, changed.identity, changed.edit) == ("answered", "yes", "partial")
        assert s.scalar(select(func.count()).select_from(JudgmentAudit)) == 1
        assert queue.progress(s, a, qs).done == 1  # v2 still open
        # Bob cannot write, or read through at_position, Alice's tasks.
        with pytest.raises(PermissionError):
            queue.answer(s, b, v1.task_id, "no", "no")
        assert queue.at_position(s, b, qs, 1) is None
        with pytest.raises(PermissionError):
            queue.get_or_create_annotator(s, "  ")
        assert s.scalar(select(func.count()).select_from(Assignment).where(Assignment.annotator_id == b.id)) == 0


def test_pool_cli_on_a_movienet_set(tmp_path: Path, capsys) -> None:
    """`python -m db.pooling --gallery movienet:ROOT`: a real-format identity set, gold identity
    from the character ids, random-init tiny backbone and baseline methods (no download)."""
    from _bench_fixtures import write_movienet

    from db.pooling import main

    frames = [(f"frames/f{i}.png", "tt1", [f"nm{i % 3}"]) for i in range(12)]
    root = write_movienet(tmp_path / "mn", frames, [
        {"query_id": f"q{i}", "reference_frame": f"frames/f{i}.png", "edit": "make it brighter",
         "film_id": "tt1", "character_id": f"nm{i % 3}"} for i in range(3)])
    db_path = tmp_path / "ann.sqlite"
    rc = main(["--gallery", f"movienet:{root}", "--backbone", "cir-tiny-vit", "--db", str(db_path),
               "--cache-dir", str(tmp_path / "cache"), "--name", "mn", "--queries", "2", "--k", "3",
               "--methods", "sum", "text-only", "--gold", "1.0"])
    assert rc == 0 and "2 queries" in capsys.readouterr().out
    eng = make_db(db_path)
    with session_factory(eng)() as s:
        tasks = s.scalars(select(Task)).all()
        assert tasks and all(t.gold_edit is None for t in tasks)
        for t in tasks:  # frame i shows nm{i % 3}; query q0 is about nm0, q1 about nm1
            q = s.get(Query, t.query_id)
            i = int(t.item_id.split("/f")[1].split(".")[0])
            want = "yes" if i % 3 == int(q.external_id[1:]) else "no"
            assert t.gold_identity == want
            assert q.meta["auto_identity"][t.item_id] == want  # every pooled item's cast label, for db.report
    eng.dispose()


def test_order_groups_each_query_and_differs_between_annotators(S, cir_engine) -> None:
    _pool(S, cir_engine, n=4, k=3)
    with S() as s:
        qs = queue.query_set_by_name(s, "demo")
        seqs = {}
        for name in ("o1", "o2"):
            ann = queue.get_or_create_annotator(s, name)
            tasks = queue._task_ids(s, qs)
            order = queue._order(ann, qs, tasks)
            q_of = {t: q for t, q, _, _ in tasks}
            runs = [q_of[t] for i, t in enumerate(order) if i == 0 or q_of[order[i - 1]] != q_of[t]]
            assert sorted(order) == sorted(t for t, _, _, _ in tasks)
            assert len(runs) == len(set(runs)) == 4  # each query's items are contiguous
            seqs[name] = order
        assert seqs["o1"] != seqs["o2"]
