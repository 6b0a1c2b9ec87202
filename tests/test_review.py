"""Issue 45 below the screens: roles in the annotators file, adjudication (the review queue, what a
reviewer sees, decisions kept apart, raw majority vs adjudicated), the organiser's table and
pausing, pairwise sets (keyed sides, win rates, Bradley-Terry), qrels and the scorer."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from _cir_fakes import fake_trained_methods, make_test_engine
from _db_fixture import build as build_hand_db
from sqlalchemy import func, select

from cir_core.errors import InputError
from cir_core.eval.qrels import query_metrics, read_qrels, read_rankings, score, write_qrels
from db import blind, review
from db.judgments import StaleAnswer
from db.labels import final_labels, grade
from db.migrate import init_db
from db.models import Adjudication, AdjudicationAudit, Judgment, QuerySet, RetrievedItem, Task
from db.pairwise import bradley_terry
from db.pooling import pool_pairwise, pool_query_set, world_queries
from db.results import load_set
from db.service import AnnotationService
from db.sqlite import open_db, session_factory
from db.users import Roles, load_roles, load_users

METHODS = ["pact", "dice", "sum"]
ROLES = Roles(reviewers=frozenset({"rev", "rev2", "ann1"}), organisers=frozenset({"org"}))


@pytest.fixture(scope="module")
def cir_engine():
    with fake_trained_methods():
        yield make_test_engine()


def _svc(path: Path, cir_engine, overlap: int = 2, audit: float = 0.0, pairwise: bool = False,
         gold: float = 0.0) -> AnnotationService:
    eng = open_db(path)
    init_db(eng)
    with session_factory(eng)() as s:
        if pairwise:
            pool_pairwise(s, cir_engine, "s", world_queries(cir_engine, 6),
                          [("pact", "cosine"), ("dice", "chord"), ("sum", "chord")], k=2, overlap=overlap)
        else:
            pool_query_set(s, cir_engine, "s", world_queries(cir_engine, 6), METHODS, k=2, overlap=overlap,
                           gold_fraction=gold, audit_share=audit)
    eng.dispose()
    return AnnotationService(path, roles=ROLES)


def _answer_all(svc, user: str, pick) -> int:
    st, n = svc.open(user, "s"), 0
    while st.task is not None:
        st = svc.answer(user, "s", st.task.task_id, answers=pick(st.task))
        n += 1
    return n


# -- roles ------------------------------------------------------------------------------------------

def test_roles_in_the_annotators_file_and_old_files_stay_valid(tmp_path: Path) -> None:
    old = tmp_path / "old.txt"
    old.write_text("# the team\nalice:wonderland\nbob:sha256:" + "0" * 64 + "\n")
    assert set(load_users(old)) == {"alice", "bob"} and load_roles(old) == Roles()
    new = tmp_path / "new.txt"
    new.write_text("alice:wonderland\ncarol:pw\n@reviewer carol hf:dana   # a comment\n@organizer alice\n")
    assert set(load_users(new)) == {"alice", "carol"}
    r = load_roles(new)
    assert r.is_reviewer("carol") and r.is_reviewer("hf:dana") and r.is_organiser("alice")
    assert not r.is_reviewer("alice") and not r.is_organiser("carol") and not r.is_reviewer(None)
    for line, words in (("@judge carol", "unknown role 'judge'"), ("@reviewer", "names nobody"),
                        ("@reviewer zoe", "'zoe' has no 'name:password' line"), ("@reviewer c\u0430rol", "not allowed")):
        bad = tmp_path / "bad.txt"
        bad.write_text("alice:wonderland\ncarol:pw\n" + line + "\n")
        with pytest.raises(ValueError, match=f"{bad}:3: .*{words}"):
            load_users(bad)  # the app refuses the file at start, naming the line


# -- adjudication -------------------------------------------------------------------------------------

def test_the_review_queue_holds_disagreements_and_a_keyed_audit_share(tmp_path: Path, cir_engine) -> None:
    svc = _svc(tmp_path / "a.sqlite", cir_engine, overlap=2, audit=0.4)
    agree = lambda t: {"identity": "yes", "edit": "yes" if t.task_id % 2 else "no"}  # noqa: E731
    _answer_all(svc, "ann1", agree)
    _answer_all(svc, "ann2", lambda t: {**agree(t), "edit": "no"} if t.task_id % 3 == 0 else agree(t))
    with svc.ReadSession() as s:
        qs = s.scalar(select(QuerySet).where(QuerySet.name == "s"))
        items = review.review_items(s, qs)
        by_task: dict = {}
        for tid, edit in s.execute(select(Judgment.task_id, Judgment.edit)):
            by_task.setdefault(tid, []).append(edit)
        mine = review.review_items(s, qs, reviewer_id=s.scalar(select(func.min(Judgment.annotator_id))))
    disagree = {t for t, e in by_task.items() if len(set(e)) > 1}
    agreed = {t for t, e in by_task.items() if len(set(e)) == 1 and len(e) == 2}
    assert disagree and {t for t, r in items.items() if r == "disagreement"} == disagree
    audited = {t for t, r in items.items() if r == "audit"}
    assert audited == {t for t in agreed if blind.uniform(qs.secret, "audit", t) < 0.4} and 0 < len(audited) < len(agreed)
    assert mine == {}  # ann1 judged every pair: none of them goes to ann1 as a reviewer


def test_a_reviewer_sees_anonymised_answers_in_a_canonical_order(tmp_path: Path, cir_engine) -> None:
    views = []
    for first, second in (("ann1", "ann2"), ("ann2", "ann1")):  # who answered first must not show
        svc = _svc(tmp_path / f"{first}.sqlite", cir_engine, overlap=2)
        _answer_all(svc, first, lambda t: {"identity": "no", "edit": "partial"})
        _answer_all(svc, second, lambda t: {"identity": "yes", "edit": "no"})
        views.append([(v.reference_id, v.item_id, v.answers) for v in svc.review_queue("rev", "s")])
        text = repr(svc.review_queue("rev", "s"))
        assert not any(w in text for w in ("ann1", "ann2", "pact", "dice", "cosine", "chord", "rank", "gold"))
        svc.close()
    assert sorted(map(repr, views[0])) == sorted(map(repr, views[1]))
    assert all(v[2][0]["identity"] == "yes" for v in views[0])  # sorted by the answers themselves


def test_decisions_are_kept_apart_and_guarded(tmp_path: Path, cir_engine) -> None:
    svc = _svc(tmp_path / "d.sqlite", cir_engine, overlap=2)
    _answer_all(svc, "ann1", lambda t: {"identity": "yes", "edit": "yes"})
    _answer_all(svc, "ann2", lambda t: {"identity": "no", "edit": "yes"})
    with svc.ReadSession() as s:
        before = s.execute(select(Judgment.id, Judgment.identity).order_by(Judgment.id)).all()
        data = load_set(s, "s")
    ties = sum(f.source == "tie" for f in final_labels(data).values())
    assert ties == len(data.task_of)  # every pair: one yes, one no
    with pytest.raises(PermissionError, match="reviewers only"):
        svc.review_open("ann2", "s")
    with pytest.raises(PermissionError, match="judged themself"):  # ann1 is a reviewer who judged them all
        svc.adjudicate("ann1", "s", data.judgments[0].task_id, {"identity": "yes", "edit": "yes"})
    first = svc.review_open("rev", "s")
    task = first.task.task_id
    with pytest.raises(ValueError, match="edit must be one of"):
        svc.adjudicate("rev", "s", task, {"identity": "yes"})
    nxt = svc.adjudicate("rev", "s", task, {"identity": "no", "edit": "yes"}, note="face hidden on the left")
    assert nxt.decided == 1 and nxt.left == first.left - 1 and nxt.task.task_id != task
    with pytest.raises(StaleAnswer, match="another reviewer"):
        svc.adjudicate("rev2", "s", task, {"identity": "yes", "edit": "yes"})
    with pytest.raises(PermissionError, match="not waiting"):
        svc.adjudicate("rev", "s", 10**9, {"identity": "yes", "edit": "yes"})
    svc.adjudicate("rev2", "s", task, {"identity": "yes", "edit": "yes"}, revise=True, move_on=False)
    with svc.ReadSession() as s:
        assert s.execute(select(Judgment.id, Judgment.identity).order_by(Judgment.id)).all() == before  # raw kept
        a = s.scalar(select(Adjudication).where(Adjudication.task_id == task))
        old = s.scalars(select(AdjudicationAudit)).all()
        assert (a.identity, a.reason) == ("yes", "disagreement") and [(o.identity, o.note) for o in old] == \
            [("no", "face hidden on the left")]
    for v in svc.review_queue("rev", "s"):
        svc.adjudicate("rev", "s", v.task_id, {"identity": "yes", "edit": "partial"}, move_on=False)
    from db.report import compute_report, format_report

    with svc.ReadSession() as s:
        rep = compute_report(s, "s", n_boot=200)
    assert rep["review"]["open_ties"] == 0 and rep["review"]["adjudicated"] == len(data.task_of)
    row = rep["labels"][0]["at_k"]
    assert row["raw_majority"]["identity"]["mean"] == 0.5 and row["adjudicated"]["identity"]["mean"] == 1.0
    assert "raw majority vs adjudicated" in format_report(rep) and "0 open ties" in format_report(rep)


# -- the organiser's view and pausing ------------------------------------------------------------------

def test_pausing_returns_the_pairs_to_the_pool_and_leaves_the_answers_out(tmp_path: Path, cir_engine) -> None:
    from db.queue import Paused

    svc = _svc(tmp_path / "p.sqlite", cir_engine, overlap=1)
    st = svc.open("ann1", "s")
    for _ in range(3):
        st = svc.answer("ann1", "s", st.task.task_id, "yes", "yes")
    held = st.task.task_id  # claimed, not answered
    n_other = _answer_all(svc, "ann2", lambda t: {"identity": "no", "edit": "no"})
    with svc.ReadSession() as s:
        total = len(load_set(s, "s").task_of)
    assert n_other == total - 4  # ann1's three answers and one claim are theirs
    with pytest.raises(PermissionError, match="organisers only"):
        svc.set_paused("ann2", "ann1", True)
    assert svc.set_paused("org", "ann1", True) is True
    with pytest.raises(Paused, match="paused by the organiser"):
        svc.open("ann1", "s")
    with pytest.raises(Paused):
        svc.answer("ann1", "s", held, "yes", "yes")
    assert _answer_all(svc, "ann2", lambda t: {"identity": "no", "edit": "no"}) == 4  # back in the pool
    from db.report import compute_report

    with svc.ReadSession() as s:
        rep = compute_report(s, "s", n_boot=100)
    assert rep["judgments"]["paused_left_out"] == 3 and any("paused" in n for n in rep["notes"])
    table = svc.annotator_table("org", "s", n_boot=100)
    assert {r["annotator"]: r["paused"] for r in table["annotators"]} == {"ann1": True, "ann2": False}
    assert svc.set_paused("org", "ann1", False) is False
    assert svc.open("ann1", "s").task is not None or True  # resumed: the queue answers again


def test_the_organiser_table_has_intervals_and_drift(tmp_path: Path, cir_engine) -> None:
    svc = _svc(tmp_path / "o.sqlite", cir_engine, overlap=3, gold=0.3)
    rng = np.random.default_rng(0)
    with svc.ReadSession() as s:
        gold = dict(s.execute(select(Task.id, Task.gold_identity)).all())
    for who, err in (("good", 0.0), ("noisy", 0.5), ("third", 0.1)):
        def pick(t, err=err):
            truth = gold.get(t.task_id) or "yes"
            wrong = rng.random() < err
            return {"identity": ("no" if truth == "yes" else "yes") if wrong else truth, "edit": "yes"}
        _answer_all(svc, who, pick)
    with pytest.raises(PermissionError):
        svc.annotator_table("good", "s")
    rep = svc.annotator_table("org", "s", n_boot=300)
    rows = {r["annotator"]: r for r in rep["annotators"]}
    assert set(rows) == {"good", "noisy", "third"}
    g = rows["good"]
    assert g["gold"]["identity"]["value"] == 1.0 and g["gold"]["identity"]["lo"] < 1.0  # Wilson, not [1, 1]
    assert g["progress"]["done"] == g["progress"]["total"] > 0
    for r in rows.values():
        for key in ("agreement", "kappa"):
            c = r[key]["identity"]
            assert c["value"] is None or c["lo"] <= c["value"] <= c["hi"]
        assert r["drift"] and all(0 < b["progress"] < 1 for b in r["drift"])
    assert rows["good"]["agreement"]["identity"]["value"] > rows["noisy"]["agreement"]["identity"]["value"]
    from db.organiser import drift_figure, format_annotators

    assert "good" in format_annotators(rep) and drift_figure(rep) is not None


# -- pairwise ------------------------------------------------------------------------------------------

def test_pairwise_sides_are_keyed_and_recorded(tmp_path: Path, cir_engine) -> None:
    svc = _svc(tmp_path / "pw.sqlite", cir_engine, pairwise=True)
    with svc.ReadSession() as s:
        qs = s.scalar(select(QuerySet).where(QuerySet.name == "s"))
        tasks = s.execute(select(Task.item_id, Task.item_b_id, Task.query_id)).all()
        assert qs.mode == "pairwise" and qs.questions == "preference" and qs.meta["pairs"]
        assert tasks and all(b and a != b for a, b, _ in tasks)
        ext = dict(s.execute(select(QuerySet.id, QuerySet.name)).all())
        from db.models import Query
        qext = dict(s.execute(select(Query.id, Query.external_id)).all())
        for a, b, q in tasks:  # the side of each item is the keyed draw, recorded as the order
            lo, hi = sorted((a, b))
            assert (a == lo) == (blind.uniform(qs.secret, "side", qext[q], lo, hi) < 0.5)
        assert ext
    st = svc.open("ann1", "s")
    assert st.task.item_b_id and [q.name for q in st.questions] == ["preference"]
    with pytest.raises(ValueError, match="preference must be one of"):
        svc.answer("ann1", "s", st.task.task_id, "yes", "yes")
    with pytest.raises(ValueError, match="does not ask identity"):
        svc.answer("ann1", "s", st.task.task_id, answers={"preference": "a", "identity": "yes"})


def test_pairwise_win_rates_and_bradley_terry_agree_with_the_answers(tmp_path: Path, cir_engine) -> None:
    """Annotators always choose the item with the smaller id: the report's win rates must be what
    counting the answers per pair of methods gives, and Bradley-Terry's first method must win."""
    from db.models import Query
    from db.report import compute_report, format_report

    svc = _svc(tmp_path / "bt.sqlite", cir_engine, pairwise=True, overlap=2)
    pick = lambda t: {"preference": "a" if t.item_id < t.item_b_id else "b"}  # noqa: E731
    with svc.ReadSession() as s:
        n_tasks = s.scalar(select(func.count()).select_from(Task))
    # every pair reaches the queue (one item in several of a query's pairs used to hide all but one)
    assert _answer_all(svc, "ann1", pick) == _answer_all(svc, "ann2", pick) == n_tasks
    with svc.ReadSession() as s:
        rep = compute_report(s, "s", n_boot=300)
        at = {(q, f"{m}/{sc}", r): it for q, m, sc, r, it in s.execute(
            select(RetrievedItem.query_id, RetrievedItem.method, RetrievedItem.scoring, RetrievedItem.rank,
                   RetrievedItem.item_id))}
        queries = s.scalars(select(Query.id)).all()
    pw = rep["pairwise"]
    for p in pw["pairs"]:
        wins = n = 0
        for q in queries:
            for r in (1, 2):
                x, y = at.get((q, p["x"], r)), at.get((q, p["y"], r))
                if x and y and x != y:
                    wins, n = wins + 2 * (x < y), n + 2  # two annotators, both pick the smaller id
        assert p["raw"]["n"] == n and (n == 0 or math.isclose(p["raw"]["win_rate"]["mean"], wins / n))
        if n:
            assert p["raw"]["win_rate"]["lo"] <= p["raw"]["win_rate"]["mean"] <= p["raw"]["win_rate"]["hi"]
    top = pw["bradley_terry"][0]["method"]
    for p in pw["pairs"]:
        if p["tasks"] and top in (p["x"], p["y"]):
            rate = p["raw"]["win_rate"]["mean"]
            assert (rate if p["x"] == top else 1 - rate) >= 0.5
    assert "Bradley-Terry" in format_report(rep) and 0 <= pw["position_bias"]["share_a"] <= 1


def test_bradley_terry_recovers_known_strengths() -> None:
    rng = np.random.default_rng(1)
    true = np.log(np.array([4.0, 2.0, 1.0, 0.5]))
    wins = np.zeros((4, 4))  # wins[i, j]: i beat j
    for _ in range(4000):
        i, j = rng.choice(4, 2, replace=False)
        if rng.random() < math.exp(true[i]) / (math.exp(true[i]) + math.exp(true[j])):
            wins[i, j] += 1
        else:
            wins[j, i] += 1
    got = bradley_terry(wins)
    assert np.allclose(got, true - true.mean(), atol=0.15)


# -- qrels ----------------------------------------------------------------------------------------------

def test_qrels_from_the_final_labels(tmp_path: Path) -> None:
    """The hand DB (_db_fixture): q0/x tied (yes/yes vs no/partial: resolved low, 0), q0/y
    cant_tell 0, q0/z yes/partial 2, q1/u yes/yes 3, q1/v no 0, q1/w skipped (unjudged: -1 only
    with --pool-depth)."""
    from db.export import main as export
    from db.export import qrels_rows

    path = build_hand_db(tmp_path / "h.sqlite")
    eng = open_db(path)
    with session_factory(eng)() as s:
        rows, counts = qrels_rows(s, "s")
        deep, _ = qrels_rows(s, "s", pool_depth=2)
        with pytest.raises(InputError, match="pool-depth"):
            qrels_rows(s, "s", pool_depth=3)
    eng.dispose()
    assert rows == [("q0", "x", 0), ("q0", "y", 0), ("q0", "z", 2), ("q1", "u", 3), ("q1", "v", 0)]
    assert counts["resolved_low"] == 1 and counts["left_out"] == 1 and ("q1", "w", -1) in deep
    out = tmp_path / "q.txt"
    assert export(["--db", str(path), "--format", "qrels", "--set", "s", "--out", str(out), "--pool-depth", "2"]) == 0
    assert read_qrels(out) == {"q0": {"x": 0, "y": 0, "z": 2}, "q1": {"u": 3, "v": 0, "w": -1}}
    f = final_labels(load_set(session_factory(open_db(path))(), "s"))
    assert sorted(grade(x, False) for x in f.values() if x.source != "unjudged") == [0, 0, 0, 2, 3]


def test_the_scorer_by_hand(tmp_path: Path) -> None:
    judged = {"a": 3, "b": 0, "c": 2, "d": -1}  # d pooled, unjudged; e never pooled
    m = query_metrics(judged, ["e", "b", "d", "c", "a"], [1, 2, 3], min_rel=2)
    assert (m["unjudged@1"], m["unjudged@3"]) == (1.0, 2 / 3)
    assert (m["R@1_lower"], m["R@1_condensed"], m["R@1_upper"]) == (0.0, 0.0, 1.0)
    assert (m["R@2_lower"], m["R@2_condensed"], m["R@2_upper"]) == (0.0, 1.0, 1.0)  # condensed: [b, c, a]
    # bpref: R=2 relevant (a, c), N=1 judged non-relevant (b) ranked above both: 1/2 (0 + 0) = 0
    assert m["bpref"] == 0.0
    assert query_metrics(judged, ["a", "c", "b"], [1], 2)["bpref"] == 1.0
    # nDCG'@2 condensed [b, c] = 2/log2(3) over the ideal [a, c] = 3 + 2/log2(3)
    assert math.isclose(m["ndcg'@2"], (2 / math.log2(3)) / (3 + 2 / math.log2(3)))
    q = tmp_path / "q.txt"
    write_qrels([("q1", "a", 3), ("q1", "b", 0), ("q1", "c", 2), ("q1", "d", -1)], q)
    rk = tmp_path / "rk.jsonl"
    rk.write_text(json.dumps({"method": "new", "scoring": "cosine", "query_id": "q1", "top": ["e", "b", "d", "c"]}) + "\n")
    res = score(read_qrels(q), read_rankings(rk), [1, 2])
    assert res[0]["queries"] == 1 and res[0]["metrics"]["R@2_condensed"]["mean"] == 1.0
    bad = tmp_path / "bad.txt"
    bad.write_text("q1 0 a 3\nq1 0 a 2\n")
    with pytest.raises(InputError, match="line 2: .* listed twice"):
        read_qrels(bad)
    with pytest.raises(InputError, match="docno 'has space'"):
        write_qrels([("q1", "has space", 1)], tmp_path / "x.txt")


def test_a_reviewers_order_is_drawn_once_over_the_whole_set(tmp_path: Path, cir_engine) -> None:
    """Deciding some pairs leaves the others in the same order. Drawn again over what was left
    after each decision, the keyed order picked each next pair by its place among the items'
    sorted ids, and on the world the ids carry the gallery's layout (tests/test_blind.py)."""
    svc = _svc(tmp_path / "o.sqlite", cir_engine, overlap=2)
    _answer_all(svc, "ann1", lambda t: {"identity": "yes", "edit": "yes"})
    _answer_all(svc, "ann2", lambda t: {"identity": "no", "edit": "yes"})
    before = [v.task_id for v in svc.review_queue("rev", "s")]
    decided = before[4::3]
    for t in decided:
        svc.adjudicate("rev2", "s", t, {"identity": "yes", "edit": "yes"}, move_on=False)
    assert [v.task_id for v in svc.review_queue("rev", "s")] == [t for t in before if t not in decided]
    other = [v.task_id for v in svc.review_queue("rev2", "s")]
    assert sorted(other) == sorted(t for t in before if t not in decided) and other != [t for t in before if t
                                                                                      not in decided]
