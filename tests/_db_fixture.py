"""A tiny annotation DB with hand-chosen labels, shared by test_report and test_export.

Query set "s" (pool_k 2), annotators ann1/ann2, two methods on cosine:
    q0: A = [x, y]   B = [x, z]        q1: A = [u, v]   B = [w, u]
Answers (identity / edit):
    q0/x  ann1 yes/yes, ann2 no/partial   -> item identity 0.5, edit 0.75, strict 0.5
    q0/y  ann1 cant_tell/no               -> identity 0, cant_tell 1, edit 0   (A only)
    q0/z  ann1 yes/partial                -> identity 1, edit 0.5, strict 0     (B only)
    q1/u  ann1 yes/yes  (GOLD: yes/partial) -> 1, 1
    q1/v  ann1 no/no                      -> 0, 0
    q1/w  ann2 SKIPPED "blurry"           -> unjudged, so B does not cover q1
"""
from __future__ import annotations

from pathlib import Path

from db.judgments import upsert_judgment
from db.migrate import init_db
from db.models import Annotator, Query, QuerySet, RetrievedItem, Task
from db.sqlite import open_db, session_factory

COMMENT = 'face hidden, "maybe" hers\nsecond line'


def build(path: Path) -> Path:
    """Create the DB at `path` and return it."""
    engine = open_db(path)
    init_db(engine)
    with session_factory(engine)() as s:
        qs = QuerySet(name="s", source="test", overlap=1, pool_k=2)
        q0 = Query(query_set=qs, external_id="q0", reference_id="r0", edit_text="make it red")
        q1 = Query(query_set=qs, external_id="q1", reference_id="r1", edit_text="add rain")
        a1, a2 = Annotator(name="ann1"), Annotator(name="ann2")
        s.add_all([qs, q0, q1, a1, a2])
        ranks = {(q0, "A"): ["x", "y"], (q0, "B"): ["x", "z"],
                 (q1, "A"): ["u", "v"], (q1, "B"): ["w", "u"]}
        for (q, method), items in ranks.items():
            for r, item in enumerate(items, start=1):
                s.add(RetrievedItem(query=q, method=method, scoring="cosine", rank=r,
                                    item_id=item, score=1.0 / r))
        tasks = {(q.external_id, it): Task(query=q, item_id=it)
                 for q, its in ((q0, "xyz"), (q1, "uvw")) for it in its}
        tasks[("q1", "u")].gold_identity, tasks[("q1", "u")].gold_edit = "yes", "partial"
        s.add_all(tasks.values())
        s.commit()

        def judge(ann: Annotator, key: tuple[str, str], identity: str | None, edit: str | None,
                  **kw: object) -> None:
            upsert_judgment(s, ann.id, tasks[key].id, identity, edit, **kw)

        judge(a1, ("q0", "x"), "yes", "yes", comment=COMMENT, time_spent_ms=1200,
              shown_position=1)
        judge(a2, ("q0", "x"), "no", "partial", shown_position=2)
        judge(a1, ("q0", "y"), "cant_tell", "no")
        judge(a1, ("q0", "z"), "yes", "partial")
        judge(a1, ("q1", "u"), "yes", "yes")
        judge(a1, ("q1", "v"), "no", "no")
        judge(a2, ("q1", "w"), None, None, skip_reason="blurry")
        s.commit()
    engine.dispose()
    return path
