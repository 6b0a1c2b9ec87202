"""Issue 27, item 1: nothing an annotator can see predicts which method retrieved a pair, at
which rank, or whether it is a gold pair — neither the ids the app assigns (task ids, queue
positions) nor their own export, which holds only what they answered.

The demo set is pooled (30 queries, every method x cosine/Chord, top 5, 10 % gold) and one
annotator walks all of it; every visible order is then tested against the pooling, with exact
tails under "the field is unrelated to the pooling" (a p-value below 1e-6 fails: with ~30 tests
a false alarm is a few in a hundred thousand runs). In pooling order the lowest task id of a
query was PACT/cosine's rank 1 in every query."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from _cir_fakes import fake_trained_methods, make_test_engine
from db import queue
from db.export import OWN_FIELDS, own_rows
from db.migrate import init_db
from db.models import Annotator, Query, QuerySet, RetrievedItem, Task
from db.service import DEFAULT_SET, AnnotationService
from db.sqlite import open_db, session_factory

P_FAIL = 1e-6


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """The pooled demo set after one annotator answered every pair: (service, screens)."""
    with fake_trained_methods():
        eng = make_test_engine()
        eng.methods.available()
        svc = AnnotationService(tmp_path_factory.mktemp("blind") / "ann.sqlite")
        assert svc.ensure_default_set(eng) == DEFAULT_SET
    st = svc.open("walker", DEFAULT_SET)
    screens = []
    while st.task is not None:
        screens.append(st.task)
        st = svc.answer("walker", DEFAULT_SET, st.task.task_id, "yes", "no", comment="=1+1")
    yield svc, screens
    svc.close()


def _pooling(svc: AnnotationService) -> tuple[dict, dict]:
    """(query id, item) -> {(method, scoring): rank}; task id -> (query id, item, is gold)."""
    with svc.ReadSession() as s:
        ranks: dict = {}
        for q, item, m, sc, r in s.execute(select(RetrievedItem.query_id, RetrievedItem.item_id,
                                                  RetrievedItem.method, RetrievedItem.scoring, RetrievedItem.rank)):
            ranks.setdefault((q, item), {})[(m, sc)] = r
        tasks = {t: (q, item, gi is not None or ge is not None) for t, q, item, gi, ge in s.execute(
            select(Task.id, Task.query_id, Task.item_id, Task.gold_identity, Task.gold_edit))}
    return ranks, tasks


def _tail(ps: list[float], hits: int) -> float:
    """P(X >= hits) for X a sum of independent Bernoulli(p) (exact)."""
    dist = np.zeros(len(ps) + 1)
    dist[0] = 1.0
    for p in ps:
        dist[1:] = dist[1:] * (1 - p) + dist[:-1] * p
        dist[0] *= 1 - p
    return float(dist[hits:].sum())


def _check_field(name: str, value_of: dict, ranks: dict, tasks: dict) -> list[str]:
    """Failures of field `name` (task id -> an orderable value) against method, rank and gold."""
    value_of = {t: i for i, t in enumerate(sorted(value_of, key=value_of.get))}  # as ranks
    by_query: dict = {}
    for t, (q, item, gold) in tasks.items():
        by_query.setdefault(q, []).append((value_of[t], item, gold))
    combos = sorted({c for v in ranks.values() for c in v})
    bad = []
    # 1. The task with the lowest value is one method's rank-1 item more often than chance?
    for combo in combos:
        hits, ps = 0, []
        for q, rows in by_query.items():
            low = min(rows)[1]
            hits += ranks[(q, low)].get(combo) == 1
            ps.append(1 / len(rows))
        if _tail(ps, hits) < P_FAIL:
            bad.append(f"{name}: the lowest is {combo}'s rank 1 in {hits}/{len(by_query)} queries")
    # 2. Rank correlation with the best rank any method gave the item (Spearman, per query).
    num, var = 0.0, 0.0
    for q, rows in by_query.items():
        if len(rows) < 3:
            continue
        v = np.argsort(np.argsort([r[0] for r in rows]))
        best = np.argsort(np.argsort([min(ranks[(q, r[1])].values()) + i * 1e-6 for i, r in enumerate(rows)]))
        num += float(np.corrcoef(v, best)[0, 1])
        var += 1 / (len(rows) - 1)
    z = num / math.sqrt(var)
    if abs(z) > 4.9:  # two-sided p < 1e-6
        bad.append(f"{name}: rank correlation with the best pooled rank, z = {z:.1f}")
    # 3. Gold pairs sit low or high in the order?
    pos = [rank / (len(rows) - 1) for rows in by_query.values() if len(rows) > 1
           for rank, r in enumerate(sorted(rows)) if r[2]]
    if pos:
        z = (np.mean(pos) - 0.5) / math.sqrt(1 / 12 / len(pos))
        if abs(z) > 4.9:
            bad.append(f"{name}: gold pairs' place in the order, z = {z:.1f}")
    return bad


def test_no_visible_id_or_order_predicts_method_rank_or_gold(walked) -> None:
    svc, screens = walked
    ranks, tasks = _pooling(svc)
    assert len(screens) == len(tasks) and any(g for _, _, g in tasks.values())
    with svc.ReadSession() as s:
        rows = own_rows(s, "walker")
    row_at = {(r["query_external_id"], r["item_id"]): i for i, r in enumerate(rows)}
    fields = {"task id": {t: t for t in tasks},
              "queue position": {v.task_id: v.position for v in screens},
              "item id": {t: item for t, (_, item, _) in tasks.items()},
              "the export's row order": {v.task_id: row_at[(v.query_external_id, v.item_id)] for v in screens}}
    bad = [b for name, value_of in fields.items() for b in _check_field(name, value_of, ranks, tasks)]
    assert bad == []


def test_the_test_sees_pooling_order(walked) -> None:
    """The check is not blind itself: ids numbered in pooling order (first appearance over
    scoring, method, rank, as before issue 27) fail it."""
    svc, _ = walked
    ranks, tasks = _pooling(svc)
    with svc.ReadSession() as s:
        meta = s.scalar(select(QuerySet.meta).where(QuerySet.name == DEFAULT_SET))
    m_at, sc_at = {m: i for i, m in enumerate(meta["methods"])}, {c: i for i, c in enumerate(meta["scorings"])}
    order = {}
    for (q, item), by in ranks.items():
        first = min((sc_at[sc], m_at[m], r) for (m, sc), r in by.items())
        order[(q, item)] = (q, first)
    pooled_ids = {t: order[(q, item)] for t, (q, item, _) in tasks.items()}
    assert _check_field("pooling order", pooled_ids, ranks, tasks)


def test_the_own_export_holds_only_what_was_answered(walked) -> None:
    svc, screens = walked
    with svc.ReadSession() as s:
        rows = own_rows(s, "walker")
    assert len(rows) == len(screens) and all(tuple(r) == OWN_FIELDS for r in rows)
    assert not {"task_id", "gold_identity", "gold_edit"} & set(OWN_FIELDS)
    assert not any(w in f for f in OWN_FIELDS for w in ("method", "rank", "score", "gold", "task"))


def _hand_pooled(path: Path, ids: list[int]) -> None:
    """One query, items a..e inserted with the given task ids (as any pooling might number them)."""
    eng = open_db(path)
    init_db(eng)
    with session_factory(eng)() as s:
        qs = QuerySet(name="hand", source="test", overlap=1, pool_k=5)
        q = Query(query_set=qs, external_id="q0", reference_id="r", edit_text="e")
        s.add_all([qs, q])
        s.flush()
        s.add_all([Task(id=i, query_id=q.id, item_id=item) for i, item in zip(ids, "abcde")])
        s.add(Annotator(name="replayer"))
        s.commit()
    eng.dispose()


def test_the_queue_order_follows_item_ids_not_task_ids(tmp_path) -> None:
    """The queue's shuffle is seeded by the annotator's and the set's names, which the annotator
    knows: replayed over task ids it would give back their order (pooling order in sets pooled
    before ids were shuffled). It is applied to item ids, so renumbering the tasks changes nothing."""
    seen = []
    for k, ids in enumerate(([1, 2, 3, 4, 5], [5, 4, 3, 2, 1], [3, 1, 5, 2, 4])):
        _hand_pooled(tmp_path / f"{k}.sqlite", ids)
        eng = open_db(tmp_path / f"{k}.sqlite")
        with session_factory(eng)() as s:
            ann = queue.find_annotator(s, "replayer")
            qs = queue.query_set_by_name(s, "hand")
            items = []
            while (v := queue.current(s, ann, qs)) is not None:
                items.append(v.item_id)
                queue.answer(s, ann, v.task_id, "yes", "yes")
        eng.dispose()
        seen.append(items)
    assert seen[0] == seen[1] == seen[2] and sorted(seen[0]) == list("abcde")


def test_gold_accuracy_waits_for_the_end_of_the_set(walked) -> None:
    """Shown after every answer, the own gold count would tell which pairs are the gold ones."""
    from ui.annotation_results import own_markdown

    svc, _ = walked
    assert "Your gold accuracy**: identity" in own_markdown(svc, "walker", DEFAULT_SET)  # finished
    st = svc.open("midway", DEFAULT_SET)
    for _ in range(5):
        st = svc.answer("midway", DEFAULT_SET, st.task.task_id, "yes", "yes")
    text = own_markdown(svc, "midway", DEFAULT_SET)
    assert "5** answered" in text and "identity" not in text and "once you have finished" in text


def test_the_full_results_tab_keeps_gold_accuracy_for_the_end_too(walked) -> None:
    """The full app's Results tab (method rates for a researcher) no longer shows an annotator's
    gold accuracy live either; once finished it does."""
    from ui.annotation_results import results_view

    svc, _ = walked
    holder = type("H", (), {"get": lambda self: svc})()
    done = results_view(holder, "walker", DEFAULT_SET, None).summary
    assert "Your gold accuracy**: identity" in done
    st = svc.open("halfway", DEFAULT_SET)
    for _ in range(3):
        st = svc.answer("halfway", DEFAULT_SET, st.task.task_id, "yes", "yes")
    text = results_view(holder, "halfway", DEFAULT_SET, None).summary
    assert "Your gold accuracy**" not in text and "once you have finished" in text and "identity @1" in text
