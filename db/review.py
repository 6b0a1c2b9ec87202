"""Adjudication: a reviewer decides the tasks whose answers disagree (and, for audit, a share of
the agreed ones); the decisions are stored apart from the annotators' judgments (`Adjudication`).

- **The queue** (`review_items`): every task with at least two answers (of annotators who are not
  paused) that differ on any question the set asks — `disagreement` — and, of the tasks whose
  answers agree and that have their full overlap of answers, those whose keyed draw
  (`db.blind.uniform(secret, "audit", task)`) falls under the set's `audit_share` — `audit`. Not
  yet decided, and never a task the reviewer judged themself.
- **Order**: each reviewer walks it in their own order, queries shuffled and each query's tasks
  within it, keyed by the set's secret (`db.blind.order`), like an annotator's queue.
- **Blind**: a reviewer sees the pair (reference, edit, candidate or candidates A and B) and the
  answers given, anonymised: no names, no ids, no times, no comments (a comment can be signed),
  in a canonical order (sorted by the answers themselves, so the order says nothing of who
  answered first or of the task's place in the gallery), never the method, a rank or a gold
  answer, and not whether it came for a disagreement or an audit.
- **Decisions**: one per task (`uq_adjudication_task`): the first reviewer to decide wins, a
  second gets "decided by another reviewer"; `revise=True` (the API, not the screen) changes a
  decision and keeps the old one in `adjudication_audits`.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cir_core.memo import LRU
from db import blind
from db import questions as q_registry
from db.judgments import MAX_COMMENT_CHARS, StaleAnswer, check_answers, text_problem
from db.models import QUESTIONS, Adjudication, AdjudicationAudit, Annotator, Judgment, Query, QuerySet, Task, utcnow

DISAGREEMENT, AUDIT = "disagreement", "audit"


@dataclass(frozen=True)
class ReviewView:
    """What a reviewer sees and decides for one task."""

    task_id: int  # kept server-side (the screen's state); never shown
    reference_id: str
    edit_text: str
    item_id: str
    item_b_id: Optional[str]  # pairwise: candidate B
    answers: tuple[Mapping[str, Optional[str]], ...]  # anonymised, canonical order
    character: Optional[dict] = None


@dataclass(frozen=True)
class ReviewState:
    user: str
    query_set: str
    task: ReviewView | None  # None: nothing left to review for this reviewer
    left: int  # tasks still waiting for this reviewer (this one included)
    decided: int  # decisions this reviewer made in the set
    questions: tuple[q_registry.Question, ...] = ()


@dataclass
class _Task:
    query_id: int
    item: str
    item_b: str
    judges: set[int] = field(default_factory=set)
    answers: list[dict[str, Optional[str]]] = field(default_factory=list)


def _set(session: Session, set_name: str) -> QuerySet:
    qs = session.scalars(select(QuerySet).where(QuerySet.name == set_name)).one_or_none()
    if qs is None:
        raise LookupError(f"no query set named {set_name!r}")
    return qs


def _tasks(session: Session, qs: QuerySet, asked: tuple[q_registry.Question, ...],
           only: int | None = None) -> dict[int, _Task]:
    """The set's tasks (or task `only`) with their answered judgments by active annotators."""
    cond = [Query.query_set_id == qs.id] + ([Task.id == only] if only is not None else [])
    tasks = {t: _Task(q, i, b) for t, q, i, b in session.execute(
        select(Task.id, Task.query_id, Task.item_id, Task.item_b_id).join(Query, Task.query_id == Query.id)
        .where(*cond))}
    cols = [getattr(Judgment, q.name) for q in asked]
    rows = session.execute(
        select(Judgment.task_id, Judgment.annotator_id, Judgment.status, *cols)
        .join(Task, Judgment.task_id == Task.id).join(Query, Task.query_id == Query.id)
        .join(Annotator, Judgment.annotator_id == Annotator.id)
        .where(*cond, Annotator.paused_at.is_(None)))
    for task_id, annotator_id, status, *values in rows:
        t = tasks[task_id]
        t.judges.add(annotator_id)  # a skip counts too: the reviewer did look at it
        if status == "answered":
            t.answers.append({q.name: v for q, v in zip(asked, values)})
    return tasks


def reason_for(qs: QuerySet, task_id: int, t: _Task, asked: tuple[q_registry.Question, ...]) -> str | None:
    """Why this task goes to review (module docstring), or None."""
    if len(t.answers) >= 2 and any(len({a[q.name] for a in t.answers}) > 1 for q in asked):
        return DISAGREEMENT
    if t.answers and len(t.answers) >= qs.overlap and qs.audit_share > 0 \
            and blind.uniform(qs.secret, AUDIT, task_id) < qs.audit_share:
        return AUDIT
    return None


def review_items(session: Session, qs: QuerySet, reviewer_id: int | None = None) -> dict[int, str]:
    """task id -> reason, of every task waiting for review (for `reviewer_id`: none they judged)."""
    asked = q_registry.for_set(qs.mode, qs.questions)
    tasks = _tasks(session, qs, asked)
    decided = set(session.scalars(select(Adjudication.task_id).join(Task, Adjudication.task_id == Task.id)
                                  .join(Query, Task.query_id == Query.id).where(Query.query_set_id == qs.id)))
    out = {}
    for tid, t in tasks.items():
        if tid in decided or (reviewer_id is not None and reviewer_id in t.judges):
            continue
        why = reason_for(qs, tid, t, asked)
        if why:
            out[tid] = why
    return out


_ORDERS: LRU[tuple, list[int]] = LRU(256)


def _ordered(session: Session, qs: QuerySet, reviewer: str, task_ids: list[int]) -> list[int]:
    """`task_ids` in the reviewer's own keyed order. The order is drawn once over ALL of the
    set's tasks (queries shuffled, then their tasks), and the waiting ones are read off it: drawn
    again over what is left after each decision, a fixed key would pick by position in the
    items' sorted ids, and the gallery's id layout (on the world, a query's reference, target and
    hard set are consecutive) would show through the order (tests/test_blind.py saw z = +5.2)."""
    key = (str(session.get_bind().url), qs.id, str(qs.created_at), qs.secret, reviewer)

    def make() -> list[int]:
        rows = session.execute(select(Task.id, Task.query_id, Task.item_id, Task.item_b_id)
                               .join(Query, Task.query_id == Query.id).where(Query.query_set_id == qs.id)).all()
        key_of = {(q, f"{i}\x00{b}"): t for t, q, i, b in rows}
        groups: dict[int, list[str]] = defaultdict(list)
        for (q, k) in key_of:
            groups[q].append(k)
        return [key_of[(q, k)] for q, k in blind.order(qs.secret, f"review\x00{reviewer}", groups)]

    waiting = set(task_ids)
    return [t for t in _ORDERS.get_or_make(key, make) if t in waiting]


def _canonical(answers: list[dict[str, Optional[str]]], asked: tuple[q_registry.Question, ...]
               ) -> tuple[dict[str, Optional[str]], ...]:
    """The answers sorted by themselves (each question's choice order): who answered is gone."""
    def key(a: dict) -> tuple:
        return tuple(q.values.index(a[q.name]) if a[q.name] in q.values else -1 for q in asked)
    return tuple(sorted(answers, key=key))


def view(session: Session, qs: QuerySet, task_id: int) -> ReviewView:
    """The reviewer's screen for one task."""
    from db.queue import character_of  # the same rule as the annotators' screen

    asked = q_registry.for_set(qs.mode, qs.questions)
    t = _tasks(session, qs, asked, only=task_id)[task_id]
    ref, edit, meta = session.execute(select(Query.reference_id, Query.edit_text, Query.meta)
                                      .where(Query.id == t.query_id)).one()
    return ReviewView(task_id, ref, edit, t.item, t.item_b or None, _canonical(t.answers, asked), character_of(meta))


def queue(session: Session, qs: QuerySet, reviewer: str, reviewer_id: int | None) -> list[int]:
    """The reviewer's remaining tasks, in their order (`reviewer_id` None: a reviewer who has no
    annotator row yet, so judged nothing)."""
    return _ordered(session, qs, reviewer, list(review_items(session, qs, reviewer_id)))


def decided_by(session: Session, qs: QuerySet, reviewer_id: int) -> int:
    return len(session.scalars(select(Adjudication.id).join(Task, Adjudication.task_id == Task.id)
                               .join(Query, Task.query_id == Query.id)
                               .where(Query.query_set_id == qs.id, Adjudication.reviewer_id == reviewer_id)).all())


def adjudicate(session: Session, qs: QuerySet, reviewer: Annotator, task_id: Any,
               answers: Mapping[str, Optional[str]], note: str | None = None, revise: bool = False) -> Adjudication:
    """Store `reviewer`'s decision on `task_id` (flushes; the caller commits). PermissionError
    when the task is not waiting for this reviewer (not in the set, not in review, judged by
    them); `StaleAnswer` when another reviewer decided it first (unless `revise`)."""
    if isinstance(task_id, bool) or not isinstance(task_id, int):
        raise PermissionError(f"task {task_id!r} is not waiting for review")
    asked = q_registry.for_set(qs.mode, qs.questions)
    full = check_answers(dict(answers), asked)
    note = note.strip() or None if isinstance(note, str) else None
    if note is not None and (len(note) > MAX_COMMENT_CHARS or text_problem("note", note)):
        raise ValueError(text_problem("note", note) or f"a note may hold {MAX_COMMENT_CHARS} characters")
    tasks = _tasks(session, qs, asked, only=task_id)
    if task_id not in tasks:
        raise PermissionError(f"task {task_id} is not waiting for review")
    t = tasks[task_id]
    existing = session.scalars(select(Adjudication).where(Adjudication.task_id == task_id)).one_or_none()
    if existing is not None:
        if not revise:
            raise StaleAnswer("another reviewer decided this pair meanwhile; nothing was changed: press N")
        session.add(AdjudicationAudit(adjudication_id=existing.id, reviewer_id=existing.reviewer_id,
                                      **{q.name: getattr(existing, q.name) for q in QUESTIONS}, note=existing.note))
        for name, value in full.items():
            setattr(existing, name, value)
        existing.reviewer_id, existing.note, existing.updated_at = reviewer.id, note, utcnow()
        session.flush()
        return existing
    if reviewer.id in t.judges:
        raise PermissionError("a reviewer does not decide a pair they judged themself")
    why = reason_for(qs, task_id, t, asked)
    if why is None:
        raise PermissionError(f"task {task_id} is not waiting for review")
    row = Adjudication(task_id=task_id, reviewer_id=reviewer.id, reason=why, note=note, **full)
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:
        raise StaleAnswer("another reviewer decided this pair meanwhile; nothing was changed: press N") from None
    return row


def summary(session: Session, qs: QuerySet) -> dict[str, int]:
    """How the set's review stands: waiting (by reason) and decided."""
    waiting = Counter(review_items(session, qs).values())
    decided = session.scalars(select(Adjudication.reason).join(Task, Adjudication.task_id == Task.id)
                              .join(Query, Task.query_id == Query.id).where(Query.query_set_id == qs.id)).all()
    return {"waiting_disagreement": waiting[DISAGREEMENT], "waiting_audit": waiting[AUDIT],
            "decided": len(decided), "decided_disagreement": decided.count(DISAGREEMENT),
            "decided_audit": decided.count(AUDIT)}
