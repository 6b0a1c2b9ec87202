"""An annotator's queue over a query set: resumable, blind, in that annotator's own random order.

- **Resumable**: a task is put in the queue (an `Assignment` at the next position) when first
  shown; the first assigned-but-unjudged task is what `current` returns after a refresh or the
  next day.
- **Own order**: queries in a random order seeded by (annotator, query set), each query's items
  shuffled within it, so two annotators see the same pool in different orders (position effects
  average out) and whole queries are finished early.
- **Overlap**: a non-gold task goes to at most `QuerySet.overlap` annotators; a claim on it that
  was never answered expires after `CLAIM_TTL` so an abandoned session does not lock it forever.
  Gold tasks go to everyone.
- **Blind**: `TaskView` carries the query and the item, never a method, score or rank.
- **Attributable and private**: every read and write is scoped to one annotator id; writing a task
  that is not in that annotator's queue raises `PermissionError`.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.judgments import upsert_judgment
from db.models import Annotator, Assignment, Judgment, Query, QuerySet, Task, utcnow

CLAIM_TTL = timedelta(hours=2)
MAX_NAME = 200


@dataclass(frozen=True)
class TaskView:
    """What the annotator sees and answers for one queue position."""

    task_id: int
    position: int  # 1-based place in this annotator's queue
    query_external_id: str
    reference_id: str
    edit_text: str
    item_id: str
    status: Optional[str]  # None: not judged yet; "answered" / "skipped"
    identity: Optional[str]
    edit: Optional[str]
    skip_reason: Optional[str]
    comment: Optional[str]


@dataclass(frozen=True)
class Progress:
    done: int  # answered or skipped by this annotator
    total: int  # done + what is still open to this annotator now
    skipped: int
    latest: int  # the highest queue position assigned so far (0: none)


def get_or_create_annotator(session: Session, name: str) -> Annotator:
    """The annotator signed in as `name` (created on first sign-in). Commits a new row."""
    name = (name or "").strip()
    if not name:
        raise PermissionError("sign in first: annotation needs a signed-in user")
    if len(name) > MAX_NAME:
        raise ValueError(f"user name longer than {MAX_NAME} characters")
    found = session.scalars(select(Annotator).where(Annotator.name == name)).one_or_none()
    if found is not None:
        return found
    ann = Annotator(name=name)
    session.add(ann)
    session.commit()
    return ann


def query_set_by_name(session: Session, name: str) -> QuerySet:
    qs = session.scalars(select(QuerySet).where(QuerySet.name == name)).one_or_none()
    if qs is None:
        raise LookupError(f"no query set named {name!r}")
    return qs


def _order(annotator: Annotator, qs: QuerySet, tasks: list[tuple[int, int, bool]]) -> list[int]:
    """This annotator's order: the queries shuffled, then each query's items shuffled.

    Grouping by query keeps one reference + edit on screen for several candidates (less context
    switching) and completes whole queries early, which is what per-query rates need; the
    shuffles keep the order random per annotator and unrelated to methods or ranks."""
    # Stable across restarts and machines (not Python's salted hash()).
    seed = int.from_bytes(hashlib.sha256(f"{annotator.name}\x00{qs.name}".encode()).digest()[:8], "big")
    rng = random.Random(seed)
    by_query: dict[int, list[int]] = {}
    for t, q, _ in sorted(tasks):
        by_query.setdefault(q, []).append(t)
    queries = sorted(by_query)
    rng.shuffle(queries)
    out = []
    for q in queries:
        items = by_query[q]
        rng.shuffle(items)
        out += items
    return out


def _task_ids(session: Session, qs: QuerySet) -> list[tuple[int, int, bool]]:
    """(task id, query id, is gold) of every task in the set."""
    rows = session.execute(
        select(Task.id, Task.query_id, (Task.gold_identity.is_not(None) | Task.gold_edit.is_not(None)))
        .join(Query, Task.query_id == Query.id).where(Query.query_set_id == qs.id)).all()
    return [(int(t), int(q), bool(g)) for t, q, g in rows]


def _taken_by_others(session: Session, qs: QuerySet, annotator_id: int) -> dict[int, int]:
    """task id -> how many other annotators hold it (judged, or claimed within CLAIM_TTL)."""
    judged = select(Judgment.task_id, Judgment.annotator_id).where(Judgment.annotator_id != annotator_id)
    fresh = utcnow() - CLAIM_TTL
    claimed = (select(Assignment.task_id, Assignment.annotator_id)
               .where(Assignment.query_set_id == qs.id, Assignment.annotator_id != annotator_id,
                      Assignment.assigned_at >= fresh))
    holders = judged.union(claimed).subquery()
    rows = session.execute(select(holders.c.task_id, func.count()).group_by(holders.c.task_id)).all()
    return {int(t): int(n) for t, n in rows}


def assignments(session: Session, annotator_id: int, qs: QuerySet) -> list[Assignment]:
    return list(session.scalars(
        select(Assignment).where(Assignment.annotator_id == annotator_id,
                                 Assignment.query_set_id == qs.id).order_by(Assignment.position)))


def _open_tasks(session: Session, annotator: Annotator, qs: QuerySet, mine: set[int]) -> list[int]:
    """Tasks this annotator could still be given, in their own order."""
    taken = _taken_by_others(session, qs, annotator.id)
    tasks = _task_ids(session, qs)
    gold = {t for t, _, g in tasks if g}
    order = _order(annotator, qs, tasks)
    return [t for t in order if t not in mine and (t in gold or taken.get(t, 0) < qs.overlap)]


def _view(session: Session, a: Assignment) -> TaskView:
    task = session.get(Task, a.task_id)
    q = session.get(Query, task.query_id)
    j = session.scalars(select(Judgment).where(Judgment.annotator_id == a.annotator_id,
                                               Judgment.task_id == a.task_id)).one_or_none()
    return TaskView(task.id, a.position, q.external_id, q.reference_id, q.edit_text, task.item_id,
                    j.status if j else None, j.identity if j else None, j.edit if j else None,
                    j.skip_reason if j else None, j.comment if j else None)


def current(session: Session, annotator: Annotator, qs: QuerySet) -> TaskView | None:
    """The task to show now: the first one in the queue not judged yet, claiming the next open
    task when there is none. None: nothing left for this annotator. Commits a new claim."""
    mine = assignments(session, annotator.id, qs)
    judged = set(session.scalars(select(Judgment.task_id).where(Judgment.annotator_id == annotator.id)))
    for a in mine:
        if a.task_id not in judged:
            return _view(session, a)
    open_ = _open_tasks(session, annotator, qs, {a.task_id for a in mine})
    if not open_:
        return None
    a = Assignment(annotator_id=annotator.id, query_set_id=qs.id, task_id=open_[0],
                   position=(mine[-1].position if mine else 0) + 1)
    session.add(a)
    session.commit()
    return _view(session, a)


def at_position(session: Session, annotator: Annotator, qs: QuerySet, position: int) -> TaskView | None:
    """This annotator's task at `position` (for back/undo); None when there is none."""
    a = session.scalars(select(Assignment).where(
        Assignment.annotator_id == annotator.id, Assignment.query_set_id == qs.id,
        Assignment.position == position)).one_or_none()
    return _view(session, a) if a is not None else None


def _assignment(session: Session, annotator: Annotator, task_id: int) -> Assignment:
    a = session.scalars(select(Assignment).where(Assignment.annotator_id == annotator.id,
                                                 Assignment.task_id == task_id)).one_or_none()
    if a is None:
        # Never reveal whether the task exists or who holds it.
        raise PermissionError(f"task {task_id} is not in {annotator.name}'s queue")
    return a


def answer(session: Session, annotator: Annotator, task_id: int, identity: str, edit: str,
           comment: str | None = None, time_spent_ms: int = 0) -> TaskView:
    """Record (or change, with audit) this annotator's answer to one of their tasks. Commits."""
    a = _assignment(session, annotator, task_id)
    upsert_judgment(session, annotator.id, task_id, identity, edit, comment=comment,
                    time_spent_ms=time_spent_ms, shown_position=a.position)
    session.commit()
    return _view(session, a)


def skip(session: Session, annotator: Annotator, task_id: int, reason: str,
         time_spent_ms: int = 0) -> TaskView:
    """Skip one of this annotator's tasks with a reason (can be answered later via back). Commits."""
    a = _assignment(session, annotator, task_id)
    upsert_judgment(session, annotator.id, task_id, None, None, skip_reason=reason,
                    time_spent_ms=time_spent_ms, shown_position=a.position)
    session.commit()
    return _view(session, a)


def progress(session: Session, annotator: Annotator, qs: QuerySet) -> Progress:
    mine = assignments(session, annotator.id, qs)
    ids = [a.task_id for a in mine]
    rows = session.execute(select(Judgment.status, func.count()).where(
        Judgment.annotator_id == annotator.id, Judgment.task_id.in_(ids)).group_by(Judgment.status)).all()
    counts = {s: int(n) for s, n in rows}
    done = sum(counts.values())
    remaining = (len(mine) - done) + len(_open_tasks(session, annotator, qs, set(ids)))
    return Progress(done, done + remaining, counts.get("skipped", 0), mine[-1].position if mine else 0)
