"""An annotator's queue over a query set: resumable, blind, in that annotator's own random order.

- **Resumable**: a task is put in the queue (an `Assignment` at the next position) when first
  shown; the first assigned-but-unjudged task is what `current` returns after a refresh or the
  next day.
- **Own order**: queries in a random order keyed by the set's secret and the annotator
  (`db.blind`), each query's items shuffled within it, so two annotators see the same pool in
  different orders (position effects average out), whole queries are finished early, and nobody
  can replay the order to learn the gallery's layout.
- **Overlap**: a non-gold task goes to at most `QuerySet.overlap` annotators; a claim on it that
  was never answered expires after `CLAIM_TTL` so an abandoned session does not lock it forever.
  Gold tasks are not counted against overlap, but each annotator gets them in proportion to the
  plain pairs they get (`open_tasks`), never alone.
- **Blind**: `TaskView` carries the query and the item, never a method, score or rank; what the
  annotator can download names pairs by opaque ids (`db.export.own_rows`).
- **Attributable and private**: every read and write is scoped to one annotator id; writing a task
  that is not in that annotator's queue raises `PermissionError`.
- **Concurrent writers**: on SQLite every writing transaction holds the file's write lock from
  BEGIN. On PostgreSQL (several app replicas on one database) the writes lock rows instead: the
  annotator's row before any write of theirs, and the query set's row before a claim (see
  db/postgres.py); on SQLite `FOR UPDATE` is not emitted and the file lock does the same job.
- **Fast**: a set's tasks never change after pooling, so its task list and each annotator's order
  are computed once per process (`_SetCache`); a screen costs a handful of indexed queries.
  Functions that write take `commit=True`; the service passes False to make one screen (answer +
  next claim + progress) one transaction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping, Optional, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cir_core.memo import LRU
from db import blind
from db.judgments import UNCHECKED, answers_of, revision_of, upsert_judgment
from db.models import Annotator, Assignment, Judgment, Query, QuerySet, Task, utcnow
from db.questions import Question
from db.users import name_problem

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
    character: Optional[dict] = None  # the query's character to follow on the reference (MovieNet: box, name)
    revision: Optional[str] = None  # db.judgments.revision_of the judgment shown (None: not judged)
    item_b_id: Optional[str] = None  # a pairwise task's candidate B (item_id is A); None: pointwise
    answers: Mapping[str, Optional[str]] = field(default_factory=dict)  # every question's saved answer


@dataclass(frozen=True)
class Progress:
    done: int  # answered or skipped by this annotator
    total: int  # done + what is still open to this annotator now
    skipped: int
    latest: int  # the highest queue position assigned so far (0: none)


class Paused(PermissionError):
    """An organiser paused this annotator (db.organiser): no pair is shown or saved."""


PAUSED = ("Your annotation is paused by the organiser: nothing more is shown or saved for now. "
          "Your answers so far are kept. Ask the organiser.")


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def check_not_paused(session: Session, annotator: Any) -> None:
    """`Paused` when an organiser has paused `annotator` (read each time: a pause acts at once)."""
    if session.scalar(select(Annotator.paused_at).where(Annotator.id == annotator.id)) is not None:
        raise Paused(PAUSED)


def find_annotator(session: Session, name: str) -> Annotator | None:
    """The annotator signed in as `name`, or None (no write)."""
    name = _check_name(name)
    return session.scalars(select(Annotator).where(Annotator.name == name)).one_or_none()


def _check_name(name: Any) -> str:
    name = (name if isinstance(name, str) else "").strip()
    if not name:
        raise PermissionError("sign in first: annotation needs a signed-in user")
    if len(name) > MAX_NAME:
        raise ValueError(f"user name longer than {MAX_NAME} characters")
    problem = name_problem(name)
    if problem:
        raise PermissionError(problem)
    return name


def get_or_create_annotator(session: Session, name: str, commit: bool = True) -> Annotator:
    """The annotator signed in as `name` (created on first sign-in; commits a new row unless
    `commit` is False). Two first sign-ins at once (two replicas) insert one row."""
    name = _check_name(name)
    found = session.scalars(select(Annotator).where(Annotator.name == name)).one_or_none()
    if found is not None:
        return found
    dialect = _dialect(session)
    if dialect in ("sqlite", "postgresql"):
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert
        session.execute(insert(Annotator).values(name=name, created_at=utcnow())
                        .on_conflict_do_nothing(index_elements=["name"]))
    else:  # pragma: no cover (the two supported backends are above)
        session.add(Annotator(name=name))
        session.flush()
    ann = session.scalars(select(Annotator).where(Annotator.name == name)).one()
    if commit:
        session.commit()
    return ann


def lock_annotator(session: Session, annotator: Annotator) -> None:
    """Serialise this annotator's writes (PostgreSQL row lock; SQLite already holds the file lock)."""
    if _dialect(session) != "sqlite":
        session.execute(select(Annotator.id).where(Annotator.id == annotator.id).with_for_update())


def _lock_set(session: Session, qs: QuerySet) -> None:
    """Serialise claims in one set (the overlap count), as above."""
    if _dialect(session) != "sqlite":
        session.execute(select(QuerySet.id).where(QuerySet.id == qs.id).with_for_update())


def query_set_by_name(session: Session, name: str) -> QuerySet:
    if not isinstance(name, str) or not name or len(name) > 200:
        raise LookupError("no such query set")
    qs = session.scalars(select(QuerySet).where(QuerySet.name == name)).one_or_none()
    if qs is None:
        raise LookupError(f"no query set named {name!r}")
    return qs


def _order(annotator: Annotator, qs: QuerySet, tasks: list[tuple[int, int, bool, str]]) -> list[int]:
    """This annotator's order: the queries shuffled, then each query's items shuffled, keyed by
    the set's secret (`db.blind.order`): random per annotator, unrelated to methods, ranks or the
    gallery's ids, and not replayable by the annotator. The shuffle reads item ids, never task
    ids, so the order does not depend on how pooling numbered the tasks."""
    task_of = {(q, item): t for t, q, _, item in tasks}
    groups: dict[int, list[str]] = {}
    for _, q, _, item in tasks:
        groups.setdefault(q, []).append(item)
    return [task_of[(q, item)] for q, item in blind.order(qs.secret, annotator.name, groups)]


def _task_ids(session: Session, qs: QuerySet) -> list[tuple[int, int, bool, str]]:
    """(task id, query id, is gold, item key) of every task in the set; the item key is the item id,
    and for a pairwise task its two items (one item is in several of a query's pairs)."""
    rows = session.execute(
        select(Task.id, Task.query_id, (Task.gold_identity.is_not(None) | Task.gold_edit.is_not(None)),
               Task.item_id, Task.item_b_id)
        .join(Query, Task.query_id == Query.id).where(Query.query_set_id == qs.id)).all()
    return [(int(t), int(q), bool(g), f"{i}\x00{b}" if b else str(i)) for t, q, g, i, b in rows]


class _SetCache:
    """A set's tasks (fixed once pooled: pooling writes a set in one transaction and nothing
    adds tasks later) and each annotator's order over them, per database and set. Keyed by the
    database URL, the set's id, name and creation time, so a new DB at the same path or a set
    pooled again under an old id is never served stale data."""

    MAX = 256

    def __init__(self) -> None:
        self._tasks: LRU[tuple, tuple[list[tuple[int, int, bool, str]], frozenset[int]]] = LRU(self.MAX)
        self._orders: LRU[tuple, list[int]] = LRU(self.MAX)
        self._picks: LRU[tuple, dict[int, float]] = LRU(self.MAX)

    @staticmethod
    def _key(session: Session, qs: QuerySet) -> tuple:
        return (str(session.get_bind().url), qs.id, qs.name, str(qs.created_at), qs.secret)

    def tasks(self, session: Session, qs: QuerySet) -> tuple[list[tuple[int, int, bool, str]], frozenset[int]]:
        key = self._key(session, qs)
        def make() -> tuple[list[tuple[int, int, bool, str]], frozenset[int]]:
            rows = _task_ids(session, qs)
            return rows, frozenset(t for t, _, g, _ in rows if g)
        return self._tasks.get_or_make(key, make)

    def order(self, session: Session, annotator: Annotator, qs: QuerySet) -> list[int]:
        key = (*self._key(session, qs), annotator.name)
        return self._orders.get_or_make(key, lambda: _order(annotator, qs, self.tasks(session, qs)[0]))

    def gold_picks(self, session: Session, annotator: Annotator, qs: QuerySet) -> dict[int, float]:
        """Keyed numbers for this annotator: per query id, the rounding draw of its gold count;
        per gold task id, its draw for being one of them (`open_tasks`)."""
        key = (*self._key(session, qs), annotator.name)

        def make() -> dict[int, float]:
            rows = self.tasks(session, qs)[0]
            picks = {-q: blind.uniform(qs.secret, "block", annotator.name, q) for q in {q for _, q, _, _ in rows}}
            picks.update({t: blind.uniform(qs.secret, "gold", annotator.name, t) for t, _, g, _ in rows if g})
            return picks
        return self._picks.get_or_make(key, make)


SET_CACHE = _SetCache()


def _taken_by_others(session: Session, qs: QuerySet, annotator_id: int) -> dict[int, int]:
    """task id -> how many other annotators hold it (judged, or claimed within CLAIM_TTL). A paused
    annotator holds nothing: their pairs return to the pool."""
    active = select(Annotator.id).where(Annotator.paused_at.is_(None))
    judged = select(Judgment.task_id, Judgment.annotator_id).where(
        Judgment.annotator_id != annotator_id, Judgment.annotator_id.in_(active))
    fresh = utcnow() - CLAIM_TTL
    claimed = (select(Assignment.task_id, Assignment.annotator_id)
               .where(Assignment.query_set_id == qs.id, Assignment.annotator_id != annotator_id,
                      Assignment.assigned_at >= fresh, Assignment.annotator_id.in_(active)))
    holders = judged.union(claimed).subquery()
    rows = session.execute(select(holders.c.task_id, func.count()).group_by(holders.c.task_id)).all()
    return {int(t): int(n) for t, n in rows}


def assignments(session: Session, annotator_id: int, qs: QuerySet) -> list[Assignment]:
    return list(session.scalars(
        select(Assignment).where(Assignment.annotator_id == annotator_id,
                                 Assignment.query_set_id == qs.id).order_by(Assignment.position)))


def open_tasks(session: Session, annotator: Annotator, qs: QuerySet, mine: OwnQueue) -> list[int]:
    """The tasks this annotator would be given next, in order (what others claim meanwhile can
    change it).

    Plain tasks come in the annotator's own order while fewer than `overlap` others hold them.
    Gold pairs sit in their query's block like the others, in the share the query has of them:
    an annotator who gets n of a query's P plain pairs gets about n/P of its G gold pairs
    (randomly rounded, keyed), all of them when they get every plain pair, none when they get
    none — a late arrival used to be given the gold pairs alone, which told them which pairs
    those were (issue 42). Which of a query's gold pairs: those the fewest others hold (then a
    keyed draw), so every gold pair is judged. A set of gold pairs only has nothing to hide them
    among: they all come, in order."""
    rows, gold = SET_CACHE.tasks(session, qs)
    held = {t for _, t in mine.queue}
    order = SET_CACHE.order(session, annotator, qs)
    if len(gold) == len(rows):
        return [t for t in order if t not in held]
    taken = _taken_by_others(session, qs, annotator.id)
    free = [t for t in order if t not in held and (t in gold or taken.get(t, 0) < qs.overlap)]
    if not gold:
        return free
    picks = SET_CACHE.gold_picks(session, annotator, qs)
    query_of = {t: q for t, q, _, _ in rows}
    plain_all: dict[int, int] = {}  # query -> its plain pairs
    plain_mine: dict[int, int] = {}  # query -> plain pairs this annotator holds or can get
    golds_of: dict[int, list[int]] = {}
    for t in order:
        q = query_of[t]
        if t in gold:
            golds_of.setdefault(q, []).append(t)
            continue
        plain_all[q] = plain_all.get(q, 0) + 1
        if t in held or taken.get(t, 0) < qs.overlap:
            plain_mine[q] = plain_mine.get(q, 0) + 1
    allowed: set[int] = set()
    for q, golds in golds_of.items():
        if not plain_all.get(q):
            continue  # a query of gold pairs only: pooling keeps a plain pair in every query
        k = math.floor(plain_mine.get(q, 0) * len(golds) / plain_all[q] + picks[-q])
        allowed.update(sorted(golds, key=lambda t: (t not in held, taken.get(t, 0), picks[t]))[:k])
    return [t for t in free if t not in gold or t in allowed]


@dataclass
class OwnQueue:
    """This annotator's queue in one set and their judgments' statuses (two small queries)."""

    queue: list[tuple[int, int]]  # (position, task id), by position
    status: dict[int, str]  # task id -> 'answered' / 'skipped' (any set)

    def first_open(self) -> tuple[int, int] | None:
        return next(((p, t) for p, t in self.queue if t not in self.status), None)

    def progress(self, open_tasks: list[int]) -> Progress:
        statuses = [self.status[t] for _, t in self.queue if t in self.status]
        done = len(statuses)
        remaining = (len(self.queue) - done) + len(open_tasks)
        return Progress(done, done + remaining, statuses.count("skipped"),
                        self.queue[-1][0] if self.queue else 0)


def own_queue(session: Session, annotator: Annotator, qs: QuerySet) -> OwnQueue:
    rows = session.execute(select(Assignment.position, Assignment.task_id).where(
        Assignment.annotator_id == annotator.id, Assignment.query_set_id == qs.id)
        .order_by(Assignment.position)).all()
    status = session.execute(select(Judgment.task_id, Judgment.status)
                             .where(Judgment.annotator_id == annotator.id)).all()
    return OwnQueue([(int(p), int(t)) for p, t in rows], {int(t): s for t, s in status})


def _view(session: Session, annotator_id: int, position: int, task_id: int) -> TaskView:
    row = session.execute(
        select(Task.id, Task.item_id, Query.external_id, Query.reference_id, Query.edit_text,
               Judgment.status, Judgment.identity, Judgment.edit, Judgment.skip_reason, Judgment.comment,
               Query.meta, Judgment, Task.item_b_id)
        .join(Query, Task.query_id == Query.id)
        .outerjoin(Judgment, (Judgment.task_id == Task.id) & (Judgment.annotator_id == annotator_id))
        .where(Task.id == task_id)).one()
    answers = answers_of(row[11]) if row[11] is not None else {}
    return TaskView(row[0], position, row[2], row[3], row[4], row[1], *row[5:10], character_of(row[10]),
                    revision_of(row[11]), row[12] or None, answers)


def character_of(meta: Any) -> dict | None:
    """What the screen may show of a query's meta: the character's box and name, nothing else
    (the meta also holds ids the annotator has no use for)."""
    if not isinstance(meta, dict) or not meta.get("character_box"):
        return None
    return {"box": meta["character_box"], "name": meta.get("character_name") or "",
            "pid": meta.get("character_id")}


def first_unanswered(session: Session, annotator: Annotator, qs: QuerySet) -> TaskView | None:
    """The first task in this annotator's queue not judged yet (no write; None if there is none)."""
    first = own_queue(session, annotator, qs).first_open()
    return _view(session, annotator.id, *first) if first else None


@dataclass(frozen=True)
class Screen:
    """What the Annotate tab shows now, and the items of the next few pairs (to render ahead)."""

    task: TaskView | None
    progress: Progress
    upcoming: tuple[str, ...] = ()  # reference and candidate item ids of the next UPCOMING pairs


UPCOMING = 3


def _upcoming(session: Session, mine: OwnQueue, first: tuple[int, int] | None, open_: list[int]) -> tuple[str, ...]:
    """Item ids of this annotator's next pairs: unanswered ones already queued, then open ones."""
    cur = first[1] if first else None
    ids = [t for _, t in mine.queue if t not in mine.status and t != cur][:UPCOMING]
    ids += open_[:UPCOMING - len(ids)]
    if not ids:
        return ()
    rows = session.execute(select(Task.id, Query.reference_id, Task.item_id)
                           .join(Query, Task.query_id == Query.id).where(Task.id.in_(ids))).all()
    by_id = {int(t): (r, i) for t, r, i in rows}
    return tuple(dict.fromkeys(x for t in ids if t in by_id for x in by_id[t]))


def screen(session: Session, annotator: Annotator, qs: QuerySet, claim: bool = True,
           commit: bool = True) -> Screen:
    """What the Annotate tab shows now — the current task (see `current`), the progress and the
    next pairs' items — from one read of the queue. With `claim` False nothing is written (a
    read transaction): the task is None when a claim would be needed (or nothing is left).
    `Paused` for a paused annotator."""
    check_not_paused(session, annotator)
    mine = own_queue(session, annotator, qs)
    first = mine.first_open()
    if first is None and claim:
        # A claim: lock (PostgreSQL), then look again — another replica may have claimed meanwhile.
        lock_annotator(session, annotator)
        _lock_set(session, qs)
        mine = own_queue(session, annotator, qs)
        first = mine.first_open()
        if first is None:
            open_ = open_tasks(session, annotator, qs, mine)
            if not open_:
                return Screen(None, mine.progress([]))
            first = ((mine.queue[-1][0] if mine.queue else 0) + 1, open_[0])
            session.add(Assignment(annotator_id=annotator.id, query_set_id=qs.id, task_id=first[1],
                                   position=first[0]))
            session.flush()
            mine.queue.append(first)
            view = _view(session, annotator.id, *first)
            upcoming = _upcoming(session, mine, first, open_[1:])
            if commit:
                session.commit()
            return Screen(view, mine.progress(open_[1:]), upcoming)
    open_ = open_tasks(session, annotator, qs, mine)
    view = _view(session, annotator.id, *first) if first else None
    return Screen(view, mine.progress(open_), _upcoming(session, mine, first, open_) if first else ())


def current(session: Session, annotator: Annotator, qs: QuerySet, commit: bool = True) -> TaskView | None:
    """The task to show now: the first one in the queue not judged yet, claiming the next open
    task when there is none. None: nothing left for this annotator. Commits a new claim unless
    `commit` is False."""
    return screen(session, annotator, qs, claim=True, commit=commit).task


def at_position(session: Session, annotator: Annotator, qs: QuerySet, position: int) -> TaskView | None:
    """This annotator's task at `position` (for back/undo); None when there is none."""
    if isinstance(position, bool) or not isinstance(position, int) or not 1 <= position <= 10**9:
        return None
    task_id = session.scalar(select(Assignment.task_id).where(
        Assignment.annotator_id == annotator.id, Assignment.query_set_id == qs.id,
        Assignment.position == position))
    return _view(session, annotator.id, position, task_id) if task_id is not None else None


def _assignment(session: Session, annotator: Annotator, task_id: int) -> Assignment:
    a = session.scalars(select(Assignment).where(Assignment.annotator_id == annotator.id,
                                                 Assignment.task_id == task_id)).one_or_none()
    if a is None:
        # Never reveal whether the task exists or who holds it.
        raise PermissionError(f"task {task_id} is not in {annotator.name}'s queue")
    return a


def _task_id(task_id: Any) -> int:
    if isinstance(task_id, bool) or not isinstance(task_id, int):
        raise PermissionError(f"task {task_id!r} is not in this annotator's queue")
    return task_id


def answer(session: Session, annotator: Annotator, task_id: int, identity: str | None = None,
           edit: str | None = None, comment: str | None = None, time_spent_ms: int = 0, commit: bool = True,
           view: bool = True, expected: object = UNCHECKED, answers: Mapping[str, str | None] | None = None,
           asked: Sequence[Question] | None = None) -> TaskView | None:
    """Record (or change, with audit) this annotator's answer to one of their tasks: `answers`
    (question -> value; `identity`, `edit` as shorthands) to every question of `asked` (the set's
    questions; None: its mode's core ones). Commits unless `commit` is False; returns the task's
    view unless `view` is False. `expected`: the `TaskView.revision` the screen showed
    (`StaleAnswer` if another tab saved since). `Paused` for a paused annotator."""
    lock_annotator(session, annotator)
    check_not_paused(session, annotator)
    a = _assignment(session, annotator, _task_id(task_id))
    upsert_judgment(session, annotator.id, a.task_id, identity, edit, comment=comment,
                    time_spent_ms=time_spent_ms, shown_position=a.position, expected=expected,
                    answers=answers, asked=asked)
    if commit:
        session.commit()
    return _view(session, annotator.id, a.position, a.task_id) if view else None


def skip(session: Session, annotator: Annotator, task_id: int, reason: str,
         time_spent_ms: int = 0, commit: bool = True, view: bool = True,
         expected: object = UNCHECKED) -> TaskView | None:
    """Skip one of this annotator's tasks with a reason (can be answered later via back). Commits
    unless `commit` is False; `expected` as for `answer`."""
    lock_annotator(session, annotator)
    check_not_paused(session, annotator)
    a = _assignment(session, annotator, _task_id(task_id))
    upsert_judgment(session, annotator.id, a.task_id, None, None, skip_reason=reason,
                    time_spent_ms=time_spent_ms, shown_position=a.position, expected=expected)
    if commit:
        session.commit()
    return _view(session, annotator.id, a.position, a.task_id) if view else None


def progress(session: Session, annotator: Annotator, qs: QuerySet) -> Progress:
    mine = own_queue(session, annotator, qs)
    return mine.progress(open_tasks(session, annotator, qs, mine))
