"""Issue 42, item 1: nothing an annotator can see or download predicts which method retrieved a
pair, at which rank, or whether it is a gold pair — and issue 45: nor anything a reviewer sees
(their queue's order, the answers shown, in their order), nor the side a pairwise pair puts a
method's result on — on the REAL engine and real pools: the shipped
world pooled exactly as the app does on first use (every trained method x cosine/Chord, top 5,
10 % gold), and a MovieNet identity set built from the film world's release export.

What an annotator sees: their queue positions, every column of their own export and its row
order, and what they could compute from public facts — the old queue order was seeded by their
name and the set's name, so anyone could replay it and read each pair's place in the gallery's id
order back from the queue. On the world the ids are laid out per query (reference, target, hard
set), which made the lowest id of a query PACE/Chord's rank 1 in 19 of 30 queries and item =
reference + 1 a (yes, yes) gold pair every time. Each visible field is tested against the pooling
with statistics that use midranks, so ties (a query-level field, equal times) count as ties and
never as an order: z of the rank-1 item's place per method x scoring, Spearman with the best
pooled rank, and the gold pairs' place. |z| > 4.9 (two-sided p < 1e-6) fails.
"""
from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Callable

import numpy as np
import pytest
from sqlalchemy import select

from db import queue
from db.export import OWN_FIELDS, own_rows
from db.migrate import init_db
from db.models import Annotator, Judgment, Query, QuerySet, RetrievedItem, Task
from db.service import DEFAULT_SET, AnnotationService
from db.sqlite import open_db, session_factory
from db.users import Roles

Z_FAIL = 4.9  # two-sided p < 1e-6
ANSWERS = {"status", "skip_reason", "comment", "annotator", "query_set",
           *__import__("db.questions").questions.QUESTIONS}  # typed by them: every question's answer


def _walk(svc: AnnotationService, set_name: str, user: str) -> list[queue.TaskView]:
    """`user` answers every pair the queue gives them; the screens, in order."""
    st = svc.open(user, set_name)
    screens = []
    while st.task is not None:
        screens.append(st.task)
        st = svc.answer(user, set_name, st.task.task_id, "yes", "no", comment="seen")
    return screens


@pytest.fixture(scope="module")
def world_engine():
    from cir_core.engine import load_engine
    from cir_core.settings import EngineConfig

    return load_engine(EngineConfig(), progress_cb=None)


@pytest.fixture(scope="module")
def world(tmp_path_factory, world_engine):
    """The shipped world and its trained methods, pooled as the app does on first use."""
    engine = world_engine
    svc = AnnotationService(tmp_path_factory.mktemp("blind-world") / "ann.sqlite")
    assert svc.ensure_default_set(engine) == DEFAULT_SET
    screens = _walk(svc, DEFAULT_SET, "walker")
    yield svc, DEFAULT_SET, "walker", screens
    svc.close()


@pytest.fixture(scope="module")
def movienet(tmp_path_factory):
    """An identity set built by the MovieNet builder from the film world's release export, with
    the trained methods on the shipped backbone, pooled with gold identity."""
    from cir_core.benchmarks import load_movienet_queryset
    from cir_core.benchmarks.movienet.build import PRESETS, build_set, scaled
    from cir_core.benchmarks.movienet.edits import read_edits
    from cir_core.engine import load_engine
    from cir_core.settings import EngineConfig
    from cir_core.world.export import export
    from db.pooling import movienet_queries, pool_query_set
    from training.build_itt import main as build_itt

    root = tmp_path_factory.mktemp("blind-movienet")
    rel, out = root / "release", root / "set"
    export("movienet-release", "val", rel, n_queries=4, image_size=64, n_films=5)
    preset = scaled(PRESETS["identity-200"], n_queries=30, n_references=30, n_ref_films=4, n_gallery=240,
                    n_gallery_films=5)
    build_set(rel, out, preset)
    assert build_itt(["--manifest", str(out / "references.jsonl"), "--out", str(out / "itt.jsonl"),
                      "--types", "scene", "--quiet"]) == 0
    build_set(rel, out, preset, edits=read_edits(out / "itt.jsonl"))
    methods = ["pact", "dice", "pace", "compose-only", "sum"]
    engine = load_engine(EngineConfig(gallery=f"movienet:{out}", backbone="cir-tiny-vit", methods=tuple(methods),
                                      cache_dir=str(root / "cache")), progress_cb=None)
    db = open_db(root / "ann.sqlite")
    init_db(db)
    with session_factory(db)() as s:
        raw = load_movienet_queryset(out)[0]
        pool_query_set(s, engine, "mn", movienet_queries(engine, raw), methods, ["cosine", "chord"], k=5,
                       gold_fraction=0.1)
        # the same queries again, for two annotators and a reviewer (test_what_a_reviewer_sees...)
        pool_query_set(s, engine, "mn-review", movienet_queries(engine, raw), methods, ["cosine", "chord"], k=5,
                       overlap=2, gold_fraction=0.1, audit_share=0.2)
    db.dispose()
    svc = AnnotationService(root / "ann.sqlite", roles=Roles(reviewers=frozenset({"reviewer"})))
    screens = _walk(svc, "mn", "walker")
    yield svc, "mn", "walker", screens
    svc.close()


# -- the statistics ---------------------------------------------------------------------------------

def midranks(values: list[Any]) -> np.ndarray:
    """1-based ranks, ties sharing the mean of their places."""
    return np.array([sum(w < v for w in values) + (sum(w == v for w in values) + 1) / 2 for v in values])


def _pooling(svc: AnnotationService, set_name: str) -> tuple[dict, dict]:
    """(query id, item) -> {(method, scoring): rank}; task id -> (query id, item, is gold)."""
    with svc.ReadSession() as s:
        qs_id = s.scalar(select(QuerySet.id).where(QuerySet.name == set_name))
        ranks: dict = {}
        for q, item, m, sc, r in s.execute(
                select(RetrievedItem.query_id, RetrievedItem.item_id, RetrievedItem.method,
                       RetrievedItem.scoring, RetrievedItem.rank)
                .join(Query, RetrievedItem.query_id == Query.id).where(Query.query_set_id == qs_id)):
            ranks.setdefault((q, item), {})[(m, sc)] = r
        tasks = {t: (q, item, gi is not None or ge is not None) for t, q, item, gi, ge in s.execute(
            select(Task.id, Task.query_id, Task.item_id, Task.gold_identity, Task.gold_edit)
            .join(Query, Task.query_id == Query.id).where(Query.query_set_id == qs_id))}
    return ranks, tasks


def leaks(name: str, value_of: dict[int, Any], ranks: dict, tasks: dict) -> list[str]:
    """What field `name` (task id -> a value the annotator sees) gives away, as failure lines."""
    by_query: dict = {}
    for t, v in value_of.items():
        q, item, gold = tasks[t]
        by_query.setdefault(q, []).append((v, item, gold))
    bad = []
    # 1. Where each method x scoring's rank-1 item sits among its query's pairs, by this field.
    combos = sorted({c for v in ranks.values() for c in v})
    for combo in combos:
        dev, var = 0.0, 0.0
        for q, rows in by_query.items():
            r = midranks([v for v, _, _ in rows])
            n = len(rows)
            for i, (_, item, _) in enumerate(rows):
                if ranks[(q, item)].get(combo) == 1 and n > 1:
                    dev += r[i] - (n + 1) / 2
                    var += (n * n - 1) / 12
        if var and abs(dev / math.sqrt(var)) > Z_FAIL:
            bad.append(f"{name}: where {combo}'s rank 1 sits, z = {dev / math.sqrt(var):+.1f}")
    # 2. Rank correlation with the best rank any method gave the item (Spearman, midranks both sides).
    num, var = 0.0, 0.0
    for q, rows in by_query.items():
        if len(rows) < 3:
            continue
        a = midranks([v for v, _, _ in rows])
        b = midranks([min(ranks[(q, item)].values()) for _, item, _ in rows])
        if a.std() > 0 and b.std() > 0:
            num += float(np.corrcoef(a, b)[0, 1])
            var += 1 / (len(rows) - 1)
    if var and abs(num / math.sqrt(var)) > Z_FAIL:
        bad.append(f"{name}: rank correlation with the best pooled rank, z = {num / math.sqrt(var):+.1f}")
    # 3. Where the gold pairs sit among their query's pairs.
    dev, var = 0.0, 0.0
    for rows in by_query.values():
        r, n = midranks([v for v, _, _ in rows]), len(rows)
        for i, (_, _, gold) in enumerate(rows):
            if gold and n > 1:
                dev += r[i] - (n + 1) / 2
                var += (n * n - 1) / 12
    if var and abs(dev / math.sqrt(var)) > Z_FAIL:
        bad.append(f"{name}: the gold pairs' place, z = {dev / math.sqrt(var):+.1f}")
    return bad


def public_seed_replay(user: str, set_name: str, screens: list[queue.TaskView]) -> dict[int, int]:
    """What an annotator computes by replaying the queue's OLD public seed (sha256 of their name
    and the set's name): for each pair, its place in its query's item-id order. Block sizes are
    what the screen shows (consecutive pairs of one reference + edit)."""
    seed = int.from_bytes(hashlib.sha256(f"{user}\x00{set_name}".encode()).digest()[:8], "big")
    rng = random.Random(seed)
    blocks: list[list[queue.TaskView]] = []
    for v in screens:
        if blocks and blocks[-1][0].query_external_id == v.query_external_id:
            blocks[-1].append(v)
        else:
            blocks.append([v])
    rng.shuffle(list(range(len(blocks))))  # the queries' shuffle: consumes the stream as the old code did
    out = {}
    for block in blocks:
        perm = list(range(len(block)))
        rng.shuffle(perm)
        out.update({v.task_id: perm[j] for j, v in enumerate(block)})
    return out


def visible_fields(svc: AnnotationService, set_name: str, user: str,
                   screens: list[queue.TaskView]) -> dict[str, dict[int, Any]]:
    """Every field an annotator sees or can compute, per task id."""
    with svc.ReadSession() as s:
        rows = [r for r in own_rows(s, user) if r["query_set"] == set_name]
    assert len(rows) == len(screens)
    by_pos = {v.position: v.task_id for v in screens}
    fields: dict[str, dict[int, Any]] = {
        "queue position": {v.task_id: v.position for v in screens},
        "the export's row order": {by_pos[r["shown_position"]]: i for i, r in enumerate(rows)},
        "the old public seed, replayed": public_seed_replay(user, set_name, screens),
    }
    for col in rows[0]:
        if col not in ANSWERS:
            fields[f"export column {col!r}"] = {by_pos[r["shown_position"]]: r[col] for r in rows}
    return fields


@pytest.mark.parametrize("which", ["world", "movienet"])
def test_nothing_an_annotator_sees_predicts_method_rank_or_gold(which, request) -> None:
    svc, set_name, user, screens = request.getfixturevalue(which)
    ranks, tasks = _pooling(svc, set_name)
    shown = {v.task_id for v in screens}
    assert any(tasks[t][2] for t in shown) and any(not tasks[t][2] for t in shown)
    fields = visible_fields(svc, set_name, user, screens)
    bad = [b for name, value_of in fields.items() for b in leaks(name, value_of, ranks, tasks)]
    assert bad == []


@pytest.mark.parametrize("which", ["world", "movienet"])
def test_the_statistics_see_the_layout_and_the_pooling(which, request) -> None:
    """The checks are not blind themselves, on these very sets: ids numbered in pooling order (as
    before issue 27) fail them, and on the world, whose ids are laid out per query, so do the
    item ids the export used to carry and the public seed replayed over them (the old queue
    order); a truly shuffled field passes, and so does a query-level field (midranks: ties are no
    order). The MovieNet set's frame ids carry no such layout that these tests detect."""
    svc, set_name, user, screens = request.getfixturevalue(which)
    ranks, tasks = _pooling(svc, set_name)
    shown = {v.task_id: v for v in screens}
    item_rank = {}
    for q in {tasks[t][0] for t in shown}:
        ids = sorted(tasks[t][1] for t in shown if tasks[t][0] == q)
        item_rank.update({t: ids.index(tasks[t][1]) for t in shown if tasks[t][0] == q})
    if which == "world":
        assert leaks("item id", {t: tasks[t][1] for t in shown}, ranks, tasks)
        assert leaks("item-id place (the old queue, replayed)", item_rank, ranks, tasks)
    with svc.ReadSession() as s:
        meta = s.scalar(select(QuerySet.meta).where(QuerySet.name == set_name))
    m_at, sc_at = {m: i for i, m in enumerate(meta["methods"])}, {c: i for i, c in enumerate(meta["scorings"])}
    pooled = {t: min((sc_at[sc], m_at[m], r) for (m, sc), r in ranks[(tasks[t][0], tasks[t][1])].items())
              for t in shown}
    assert leaks("pooling order", pooled, ranks, tasks)
    rng = random.Random(7)
    assert leaks("a shuffle", {t: rng.random() for t in shown}, ranks, tasks) == []
    assert leaks("one value per query", {t: tasks[t][0] for t in shown}, ranks, tasks) == []


def test_the_own_export_names_pairs_by_opaque_ids_only(world) -> None:
    svc, set_name, user, screens = world
    with svc.ReadSession() as s:
        rows = own_rows(s, user)
    assert len(rows) == len(screens) and all(tuple(r) == OWN_FIELDS for r in rows)
    assert not any(w in f for f in OWN_FIELDS for w in ("method", "rank", "score", "gold", "task", "item", "external"))
    items = {v.item_id for v in screens} | {v.reference_id for v in screens} | {v.query_external_id for v in screens}
    text = repr(rows)
    assert not [i for i in items if i in text]  # no gallery or query id, in any column
    assert [r["shown_position"] for r in rows] == sorted(r["shown_position"] for r in rows)
    assert len({r["pair"] for r in rows}) == len(rows)


def _hand_pooled(path, ids: list[int], secret: str) -> None:
    """One query, items a..e inserted with the given task ids (as any pooling might number them)."""
    eng = open_db(path)
    init_db(eng)
    with session_factory(eng)() as s:
        qs = QuerySet(name="hand", source="test", overlap=1, pool_k=5, secret=secret)
        q = Query(query_set=qs, external_id="q0", reference_id="r", edit_text="e")
        s.add_all([qs, q])
        s.flush()
        s.add_all([Task(id=i, query_id=q.id, item_id=item) for i, item in zip(ids, "abcde")])
        s.add(Annotator(name="replayer"))
        s.commit()
    eng.dispose()


def _queue_items(path) -> list[str]:
    eng = open_db(path)
    with session_factory(eng)() as s:
        ann = queue.find_annotator(s, "replayer")
        qs = queue.query_set_by_name(s, "hand")
        items = []
        while (v := queue.current(s, ann, qs)) is not None:
            items.append(v.item_id)
            queue.answer(s, ann, v.task_id, "yes", "yes")
    eng.dispose()
    return items


def test_the_queue_order_is_keyed_by_the_sets_secret_and_ignores_task_ids(tmp_path) -> None:
    """Renumbering the tasks changes nothing (the shuffle reads item ids); another secret gives
    another order (so it is the secret, not the public names, that decides it)."""
    key = "ab" * 32
    seen = []
    for k, ids in enumerate(([1, 2, 3, 4, 5], [5, 4, 3, 2, 1], [3, 1, 5, 2, 4])):
        _hand_pooled(tmp_path / f"{k}.sqlite", ids, key)
        seen.append(_queue_items(tmp_path / f"{k}.sqlite"))
    assert seen[0] == seen[1] == seen[2] and sorted(seen[0]) == list("abcde")
    others = set()
    for k in range(8):
        _hand_pooled(tmp_path / f"o{k}.sqlite", [1, 2, 3, 4, 5], f"{k:02d}" * 32)
        others.add(tuple(_queue_items(tmp_path / f"o{k}.sqlite")))
    assert len(others) > 1


def _gold_screen(show: Callable[[AnnotationService, str], str], svc: AnnotationService, user: str) -> str:
    return show(svc, user)


def test_gold_accuracy_is_shown_at_the_end_and_frozen_when_first_shown(world) -> None:
    """Shown after every answer, the own gold count would tell which pairs are gold; shown live
    after the end, Back + a changed answer + a second look told the same (issue 42: 6/6 found in
    101 clicks). It waits for the end of the set and then never changes."""
    from ui.annotation_results import own_markdown, results_view

    svc, set_name, user, screens = world
    first = own_markdown(svc, user, set_name)
    assert "Your gold accuracy**: identity" in first
    gold_tasks = [v for v in screens if _pooling(svc, set_name)[1][v.task_id][2]]
    for v in gold_tasks:  # flip every gold answer, as the attack did
        svc.answer(user, set_name, v.task_id, "no", "yes", comment="flipped", expected=queue_revision(svc, user, v))
    assert own_markdown(svc, user, set_name) == first
    holder = type("H", (), {"get": lambda self: svc})()
    assert first.split("Your gold accuracy")[1].splitlines()[0] in results_view(holder, user, set_name, None).summary
    with svc.Session() as s:  # a set with room for a second annotator (the demo set has overlap 1)
        qs = QuerySet(name="roomy", source="test", overlap=3, pool_k=5)
        q = Query(query_set=qs, external_id="q0", reference_id=screens[0].reference_id, edit_text="e")
        s.add_all([qs, q] + [Task(query=q, item_id=v.item_id, gold_identity="yes" if i % 4 == 0 else None)
                             for i, v in enumerate(screens[:12])])
        s.commit()
    st = svc.open("midway", "roomy")
    for _ in range(5):
        st = svc.answer("midway", "roomy", st.task.task_id, "yes", "yes")
    text = own_markdown(svc, "midway", "roomy")
    assert "5** answered" in text and "identity" not in text and "once you have finished" in text
    assert "Your gold accuracy**" not in results_view(holder, "midway", "roomy", None).summary


# -- what a reviewer sees (issue 45) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def world_review(tmp_path_factory, world_engine):
    """The shipped world pooled as the demo set is (every trained method x cosine/Chord, top 5,
    10 % gold), with overlap 2 and a 20 % audit share, for two annotators and a reviewer."""
    from cir_core.engine.core import SHOWCASE
    from db.pooling import pool_query_set, world_queries
    from db.service import DEFAULT_GOLD, DEFAULT_K, DEFAULT_QUERIES

    path = tmp_path_factory.mktemp("blind-review") / "ann.sqlite"
    svc = AnnotationService(path, roles=Roles(reviewers=frozenset({"reviewer"})))
    with svc.Session() as s:
        pool_query_set(s, world_engine, "world-review", world_queries(world_engine, DEFAULT_QUERIES, skip=SHOWCASE),
                       list(world_engine.methods.columns), k=DEFAULT_K, overlap=2, gold_fraction=DEFAULT_GOLD,
                       audit_share=0.2)
    yield svc, "world-review"
    svc.close()


def _review_walk(svc: AnnotationService, set_name: str) -> list:
    """Two annotators answer every pair (seeded noise, so they often disagree); the reviewer then
    decides their whole queue, in its order. The reviewer's screens, in order."""
    rng = random.Random(3)
    for who in ("ann-a", "ann-b"):
        st = svc.open(who, set_name)
        while st.task is not None:
            st = svc.answer(who, set_name, st.task.task_id, rng.choice(["yes", "no"]), rng.choice(["yes", "partial", "no"]))
    screens = []
    st = svc.review_open("reviewer", set_name)
    while st.task is not None:
        screens.append(st.task)
        st = svc.adjudicate("reviewer", set_name, st.task.task_id, {"identity": "yes", "edit": "no"})
    return screens


@pytest.mark.parametrize("which", ["world_review", "movienet"])
def test_nothing_a_reviewer_sees_predicts_method_rank_gold_or_who_answered(which, request) -> None:
    if which == "movienet":
        svc, set_name = request.getfixturevalue("movienet")[0], "mn-review"
    else:
        svc, set_name = request.getfixturevalue(which)
    screens = _review_walk(svc, set_name)
    ranks, tasks = _pooling(svc, set_name)
    assert len(screens) > 30 and any(tasks[v.task_id][2] for v in screens)  # gold pairs are reviewed too
    with svc.ReadSession() as s:
        given = {}
        for t, name, ident, edit in s.execute(select(Judgment.task_id, Annotator.name, Judgment.identity, Judgment.edit)
                                              .join(Annotator, Judgment.annotator_id == Annotator.id)):
            given.setdefault(t, {})[name] = {"identity": ident, "edit": edit}
    fields = {"review queue position": {v.task_id: i for i, v in enumerate(screens)}}
    first = {}
    for v in screens:
        shown = list(v.answers)
        mine = sorted(given[v.task_id].values(), key=lambda a: (("yes", "no", "cant_tell").index(a["identity"]),
                                                                ("yes", "partial", "no").index(a["edit"])))
        assert shown == mine  # the answers, sorted by themselves: their order says nothing else
        # which annotator's answer is shown first, when they differ: decided by the answer alone
        if given[v.task_id]["ann-a"] != given[v.task_id]["ann-b"]:
            first[v.task_id] = shown[0] == given[v.task_id]["ann-a"]
    fields["whose answer is shown first"] = first
    bad = [b for name, value_of in fields.items() for b in leaks(name, value_of, ranks, tasks)]
    assert bad == []
    text = repr(screens)
    assert not any(w in text for w in ("ann-a", "ann-b", "pact", "dice", "cosine", "chord", "gold", "rank"))
    # what the reviewer sees of who answered: nothing but the answers (no field names a person)
    assert {f for v in screens for f in vars(v)} == {"task_id", "reference_id", "edit_text", "item_id", "item_b_id",
                                                      "answers", "character"}


def test_a_pairwise_side_never_tells_the_method(world_engine, tmp_path) -> None:
    """Which side (A, left; B, right) a method's result is on is drawn per pair, keyed by the set's
    secret: on the real world pooled pairwise (PACT vs compose-only and vs DiCE, top 3), the share
    of each method's results on the left is ½ within chance, and the walker's queue order and
    export columns tell nothing of the methods' ranks either."""
    from cir_core.engine.core import SHOWCASE
    from db.pooling import pool_pairwise, world_queries

    svc = AnnotationService(tmp_path / "pw.sqlite")
    combos = [("pact", "cosine"), ("compose-only", "cosine"), ("dice", "cosine")]
    with svc.Session() as s:
        pool_pairwise(s, world_engine, "pw", world_queries(world_engine, 60, skip=SHOWCASE), combos, k=3)
    st, screens = svc.open("walker", "pw"), []
    while st.task is not None:
        screens.append(st.task)
        st = svc.answer("walker", "pw", st.task.task_id, answers={"preference": "a"})
    with svc.ReadSession() as s:
        where = {}
        for q, m, sc, r, item in s.execute(select(RetrievedItem.query_id, RetrievedItem.method, RetrievedItem.scoring,
                                                  RetrievedItem.rank, RetrievedItem.item_id)):
            where.setdefault((q, item), {})[(m, sc)] = r
        qof = dict(s.execute(select(Task.id, Task.query_id)).all())
        rows = own_rows(s, "walker")
    assert len(screens) > 100
    for combo in combos:
        # the pairs where the method retrieved one of the two items (not both, at other ranks):
        # is its item the left one?
        left = []
        for v in screens:
            a = combo in where.get((qof[v.task_id], v.item_id), {})
            b = combo in where.get((qof[v.task_id], v.item_b_id), {})
            if a != b:
                left.append(a)
        z = (sum(left) - len(left) / 2) / math.sqrt(len(left) / 4)
        assert abs(z) < Z_FAIL, (combo, sum(left), len(left))
    # the queue order and the export's row order against the best rank of either item
    best = {v.task_id: min([*where.get((qof[v.task_id], v.item_id), {}).values(),
                            *where.get((qof[v.task_id], v.item_b_id), {}).values()]) for v in screens}
    pos = {v.task_id: v.position for v in screens}
    for name, field in (("queue position", pos),):
        by_q: dict = {}
        for t, v in field.items():
            by_q.setdefault(qof[t], []).append((v, best[t]))
        num = var = 0.0
        for vals in by_q.values():
            if len(vals) >= 3:
                a, b = midranks([x for x, _ in vals]), midranks([y for _, y in vals])
                if a.std() > 0 and b.std() > 0:
                    num, var = num + float(np.corrcoef(a, b)[0, 1]), var + 1 / (len(vals) - 1)
        assert not var or abs(num / math.sqrt(var)) < Z_FAIL, name
    assert all("item" not in k and "method" not in k for k in rows[0])
    svc.close()


def queue_revision(svc: AnnotationService, user: str, v: queue.TaskView) -> str | None:
    """The revision a Back screen would show for `v` now."""
    with svc.ReadSession() as s:
        ann = queue.find_annotator(s, user)
        qs = queue.query_set_by_name(s, svc.current_set(user))
        return queue.at_position(s, ann, qs, v.position).revision
