"""What the Annotate and Results tabs call: one object owning the annotation DB, every call scoped
to the signed-in user's name (never an id the browser could forge).

    svc = AnnotationService("annotations.sqlite")
    svc.ensure_default_set(cir_engine)          # the world demo set, pooled once
    state = svc.open("alice", "world-demo")     # resume where alice was
    state = svc.answer("alice", "world-demo", state.task.task_id, "yes", "partial")
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from sqlalchemy import func, select

from db import questions as q_registry
from db import queue
from db.faults import DBFault, fault_kind, is_fault
from db.judgments import UNCHECKED, merge_answers
from db.migrate import init_db, removed_if_left_empty
from db.models import Annotator, Assignment, GoldFeedback, Judgment, QuerySet
from db.sqlite import describe, is_url, open_db, read_session_factory, session_factory
from db.users import Roles

if TYPE_CHECKING:
    from cir_core.engine import Engine

log = logging.getLogger(__name__)

DEFAULT_SET = "world-demo"
DEFAULT_QUERIES, DEFAULT_K, DEFAULT_GOLD = 30, 5, 0.1
SKIP_REASONS = ("reference unclear", "candidate unclear", "edit text unclear", "other")


@dataclass(frozen=True)
class _Ref:
    """An annotator row's fields the queue reads (rows are never changed once written)."""

    id: int
    name: str


@dataclass(frozen=True)
class _SetRef:
    """A query set row's fields the queue reads (fixed once pooled)."""

    id: int
    name: str
    overlap: int
    created_at: Any
    secret: str  # the set's key (db.blind): never leaves the server
    mode: str = "pointwise"
    questions: tuple[q_registry.Question, ...] = ()  # what its screens ask (db/questions.py)


@dataclass(frozen=True)
class QueueState:
    """One screen of the Annotate tab: the task at `task.position`, and where the queue stands."""

    user: str
    query_set: str
    task: queue.TaskView | None  # None: this annotator has finished the set
    progress: queue.Progress  # progress.latest: the highest position assigned so far
    upcoming: tuple[str, ...] = ()  # items of the next pairs (the app renders them ahead)
    questions: tuple[q_registry.Question, ...] = ()  # the set's questions (its screen's buttons)


class AnnotationService:
    """The annotation DB behind the app (thread-safe: one SQLAlchemy engine, short transactions).

    `target` is a SQLite file or a SQLAlchemy URL (`postgresql://...`, db/postgres.py). Reads go
    through `ReadSession` (on SQLite: no write lock, so they run in parallel), writes through
    `Session`; one screen of the Annotate tab is at most one write transaction."""

    def __init__(self, target: str | Path, synchronous: str = "FULL", roles: Roles | None = None):
        # `synchronous` (SQLite): FULL makes an acknowledged answer durable past an OS crash;
        # NORMAL only for bench/bench_durability.py, which measures what FULL costs a click.
        # `roles`: who reviews and who organises (db.users.load_roles; none by default).
        self.roles = roles or Roles()
        if is_url(str(target)):
            self.path: str | Path = str(target)
        else:
            self.path = Path(target).expanduser()
            if self.path.parent and not self.path.parent.exists():
                raise FileNotFoundError(f"annotation DB folder {self.path.parent} does not exist")
        self.engine = open_db(self.path, synchronous=synchronous)
        with removed_if_left_empty(self.engine):
            init_db(self.engine)
        self.Session = session_factory(self.engine)
        self.ReadSession = read_session_factory(self.engine)
        self._pool_lock = threading.Lock()
        # Rows that never change once written (annotators and query sets are never deleted or
        # renamed: every FK is RESTRICT), cached by name: two queries fewer per screen.
        self._annotators: dict[str, _Ref] = {}
        self._sets: dict[str, _SetRef] = {}

    def _annotator(self, s: Any, user: str, create: bool) -> Any:
        ref = self._annotators.get(user) if isinstance(user, str) else None
        if ref is not None:
            return ref
        ann = queue.find_annotator(s, user)
        if ann is not None:  # committed before this transaction: safe to remember
            return self._cache(self._annotators, user, _Ref(ann.id, ann.name))
        # Created in this transaction: not cached (a rollback would leave a dangling id).
        return queue.get_or_create_annotator(s, user, commit=False) if create else None

    def _set(self, s: Any, name: str) -> Any:
        ref = self._sets.get(name) if isinstance(name, str) else None
        if ref is None:
            qs = queue.query_set_by_name(s, name)
            ref = self._cache(self._sets, name, _SetRef(qs.id, qs.name, qs.overlap, qs.created_at, qs.secret,
                                                        qs.mode, q_registry.for_set(qs.mode, qs.questions)))
        return ref

    def set_questions(self, set_name: str) -> tuple[q_registry.Question, ...]:
        """The questions `set_name` asks (its mode's core ones and those it lists)."""
        with self.ReadSession() as s:
            return self._set(s, set_name).questions

    @staticmethod
    def _cache(d: dict, key: str, value: Any) -> Any:
        if len(d) > 10_000:
            d.clear()
        d[key] = value
        return value

    def __repr__(self) -> str:
        return f"AnnotationService({describe(self.path)!r})"

    def query_sets(self) -> list[str]:
        with self.ReadSession() as s:
            return list(s.scalars(select(QuerySet.name).order_by(QuerySet.id)))

    def current_set(self, user: str | None) -> str | None:
        """The set `user` worked in last (their newest claim), else the first set; None if none."""
        sets = self.query_sets()
        if not sets:
            return None
        if user:
            with self.ReadSession() as s:
                ann = queue.find_annotator(s, user)
                if ann is not None:
                    name = s.scalar(select(QuerySet.name).join(Assignment, Assignment.query_set_id == QuerySet.id)
                                    .where(Assignment.annotator_id == ann.id)
                                    .order_by(Assignment.assigned_at.desc(), Assignment.id.desc()).limit(1))
                    if name in sets:
                        return name
        return sets[0]

    def ensure_default_set(self, cir_engine: Engine, progress: Callable | None = None) -> str | None:
        """Pool the world demo set on first use when the DB has no query set at all (a fresh clone
        then has something to annotate). None when the gallery is not the world."""
        if self.query_sets() or cir_engine.world is None:
            return None
        from cir_core.engine.core import SHOWCASE
        from db.pooling import pool_query_set, world_queries

        with self._pool_lock:
            if self.query_sets():
                return None
            with self.Session() as s:
                qs = pool_query_set(s, cir_engine, DEFAULT_SET,
                                    world_queries(cir_engine, DEFAULT_QUERIES, skip=SHOWCASE),
                                    list(cir_engine.methods.columns), k=DEFAULT_K, gold_fraction=DEFAULT_GOLD,
                                    source="world:test", progress=progress)
                log.info("pooled the default annotation set %r", qs.name)
                return qs.name

    def _state(self, s: Any, ann: Any, qs: Any, task: queue.TaskView | None) -> QueueState:
        return QueueState(ann.name, qs.name, task, queue.progress(s, ann, qs), (), qs.questions)

    def open(self, user: str, set_name: str, position: int | None = None) -> QueueState:
        """The current task (None position), or this user's task at `position` (back/undo).
        A read transaction when the task is already in the queue; a write one to claim.
        `DBFault` when the database fails under it."""
        try:
            return self._open(user, set_name, position)
        except Exception as exc:
            if not is_fault(exc):
                raise
            log.warning("annotation DB %s while opening %r's queue: %s", fault_kind(exc), user,
                        getattr(exc, "orig", exc))
            raise DBFault(fault_kind(exc), exc) from exc

    def _open(self, user: str, set_name: str, position: int | None) -> QueueState:
        with self.ReadSession() as s:
            ann = self._annotator(s, user, create=False)
            qs = self._set(s, set_name)
            if ann is not None:
                task = queue.at_position(s, ann, qs, position) if position is not None else None
                if task is not None:
                    return self._state(s, ann, qs, task)
                sc = queue.screen(s, ann, qs, claim=False)
                if sc.task is not None:
                    return QueueState(ann.name, qs.name, sc.task, sc.progress, sc.upcoming, qs.questions)
        with self.Session() as s:  # a new annotator, or the next task to claim
            ann = self._annotator(s, user, create=True)
            qs = self._set(s, set_name)
            sc = queue.screen(s, ann, qs, claim=True, commit=False)
            s.commit()
            return QueueState(ann.name, qs.name, sc.task, sc.progress, sc.upcoming, qs.questions)

    def answer(self, user: str, set_name: str, task_id: int, identity: str | None = None,
               edit: str | None = None, comment: str | None = None, time_spent_ms: int = 0,
               expected: object = UNCHECKED, answers: dict[str, str | None] | None = None) -> QueueState:
        """Save the answer to every question the set asks (`answers`; `identity` and `edit` as
        shorthands), then move on to the current task: one transaction (the reply is sent after
        its commit, which with synchronous=FULL returns once the WAL is fsynced).
        `expected`: the revision the screen showed (`StaleAnswer` when another tab saved since).
        `DBFault` (with `saved` read back) when the database fails under it."""
        given = merge_answers(identity, edit, answers)
        want = ("answered", {q.name: given.get(q.name) for q in q_registry.QUESTIONS.values()}, None,
                (comment or "").strip() or None)

        def write(s: Any, ann: Any) -> None:
            queue.answer(s, ann, task_id, comment=comment, time_spent_ms=time_spent_ms, commit=False,
                         view=False, expected=expected, answers=given, asked=self._set(s, set_name).questions)
        return self._write(user, set_name, task_id, want, write)

    def skip(self, user: str, set_name: str, task_id: int, reason: str, time_spent_ms: int = 0,
             expected: object = UNCHECKED) -> QueueState:
        """Skip with a reason, then move on (as `answer`)."""
        want = ("skipped", {q: None for q in q_registry.QUESTIONS}, reason.strip() if isinstance(reason, str)
                else reason, None)
        return self._write(user, set_name, task_id, want, lambda s, ann: queue.skip(
            s, ann, task_id, reason, time_spent_ms, commit=False, view=False, expected=expected))

    def _write(self, user: str, set_name: str, task_id: int, want: tuple, write: Callable) -> QueueState:
        """`write(session, annotator)`, then the next screen, in one transaction; a database
        failure becomes `DBFault` with the answer read back (`want`: what it should store)."""
        try:
            with self.Session() as s:
                ann = self._annotator(s, user, create=True)
                qs = self._set(s, set_name)
                write(s, ann)
                sc = queue.screen(s, ann, qs, claim=True, commit=False)
                s.commit()
                return QueueState(ann.name, qs.name, sc.task, sc.progress, sc.upcoming, qs.questions)
        except Exception as exc:
            if not is_fault(exc):
                raise
            kind = fault_kind(exc)
            saved = self._saved(user, task_id, want)
            log.warning("annotation DB %s on a save by %r (task %s; stored after all: %s): %s", kind,
                        user, task_id, saved, getattr(exc, "orig", exc))
            raise DBFault(kind, exc, writing=True, saved=saved) from exc

    def _saved(self, user: str, task_id: Any, want: tuple) -> bool | None:
        """Whether `user`'s judgment of `task_id` holds `want` (status, answers, skip reason,
        comment) now; None when the database cannot be read either."""
        from db.judgments import answers_of

        try:
            with self.ReadSession() as s:
                ann = queue.find_annotator(s, user)
                if ann is None or isinstance(task_id, bool) or not isinstance(task_id, int):
                    return False
                j = s.scalars(select(Judgment).where(Judgment.annotator_id == ann.id,
                                                     Judgment.task_id == task_id)).first()
                return j is not None and (j.status, answers_of(j), j.skip_reason, j.comment) == want
        except Exception as exc:
            if not is_fault(exc):
                raise
            return None

    def finished(self, user: str, set_name: str) -> bool:
        """Whether `user` has nothing left in `set_name` (everything answered or skipped, nothing
        open to them). A read: nothing is claimed."""
        with self.ReadSession() as s:
            ann = queue.find_annotator(s, user)
            if ann is None:
                return False
            p = queue.progress(s, ann, self._set(s, set_name))
            return p.total > 0 and p.done == p.total

    def shown_gold(self, user: str, set_name: str) -> dict[str, Any] | None:
        """The gold accuracy `user` may see for `set_name`: None until they have finished the set;
        then the figures as they were the first time they were shown, frozen in `gold_feedback`.
        Computed live it was an oracle: change one answer through Back, read it again, and it
        told whether that pair was gold and what its answer was (issue 42)."""
        if not self.finished(user, set_name):
            return None
        from db.report import gold_accuracy

        with self.ReadSession() as s:
            ann, qs = queue.find_annotator(s, user), self._set(s, set_name)
            row = self._gold_row(s, ann.id, qs.id)
            if row is None:
                g = gold_accuracy(s, set_name, user) or {"identity": {"correct": 0, "n": 0},
                                                         "edit": {"correct": 0, "n": 0}, "skipped": 0}
        if row is None:
            with self.Session() as s:
                if self._gold_row(s, ann.id, qs.id) is None:  # another tab may have frozen it meanwhile
                    s.add(GoldFeedback(annotator_id=ann.id, query_set_id=qs.id,
                                       identity_correct=g["identity"]["correct"], identity_n=g["identity"]["n"],
                                       edit_correct=g["edit"]["correct"], edit_n=g["edit"]["n"],
                                       skipped=g["skipped"]))
                    s.commit()
                row = self._gold_row(s, ann.id, qs.id)
        return {"identity": {"correct": row[0], "n": row[1]}, "edit": {"correct": row[2], "n": row[3]},
                "skipped": row[4]}

    @staticmethod
    def _gold_row(s: Any, annotator_id: int, set_id: int) -> tuple | None:
        got = s.execute(select(GoldFeedback.identity_correct, GoldFeedback.identity_n, GoldFeedback.edit_correct,
                               GoldFeedback.edit_n, GoldFeedback.skipped)
                        .where(GoldFeedback.annotator_id == annotator_id,
                               GoldFeedback.query_set_id == set_id)).first()
        return tuple(got) if got is not None else None

    def progress_of(self, user: str) -> dict[str, Any]:
        """The user's own counts per set (what annotation-only mode's Results shows)."""
        from db.models import Judgment, Query, Task

        with self.ReadSession() as s:
            ann = queue.find_annotator(s, user)
            if ann is None:
                return {}
            rows = s.execute(select(QuerySet.name, Judgment.status, func.count())
                             .join(Task, Judgment.task_id == Task.id).join(Query, Task.query_id == Query.id)
                             .join(QuerySet, Query.query_set_id == QuerySet.id)
                             .where(Judgment.annotator_id == ann.id)
                             .group_by(QuerySet.name, Judgment.status)).all()
        out: dict[str, Any] = {}
        for name, status, n in rows:
            out.setdefault(name, {"answered": 0, "skipped": 0})[status] = int(n)
        return out

    # -- adjudication (db/review.py): reviewers only ------------------------------------------------

    def _reviewer(self, user: str) -> None:
        if not self.roles.is_reviewer(user):
            raise PermissionError("reviewers only: the organiser names reviewers in the annotators file "
                                  "('@reviewer NAME', docs/ANNOTATION.md)")

    def review_open(self, user: str, set_name: str) -> Any:
        """`user`'s review screen in `set_name`: the first task of their review queue (a read)."""
        from db import review

        self._reviewer(user)
        with self.ReadSession() as s:
            qs = queue.query_set_by_name(s, set_name)
            ann = queue.find_annotator(s, user)
            order = review.queue(s, qs, user, ann.id if ann is not None else None)
            decided = review.decided_by(s, qs, ann.id) if ann is not None else 0
            task = review.view(s, qs, order[0]) if order else None
            return review.ReviewState(user, qs.name, task, len(order), decided,
                                      q_registry.for_set(qs.mode, qs.questions))

    def review_queue(self, user: str, set_name: str) -> list[Any]:
        """Every task waiting for `user`'s review, as screens (scripts: the simulated reviewer)."""
        from db import review

        self._reviewer(user)
        with self.ReadSession() as s:
            qs = queue.query_set_by_name(s, set_name)
            ann = queue.find_annotator(s, user)
            order = review.queue(s, qs, user, ann.id if ann is not None else None)
            return [review.view(s, qs, t) for t in order]

    def adjudicate(self, user: str, set_name: str, task_id: int, answers: dict[str, str | None],
                   note: str | None = None, move_on: bool = True, revise: bool = False) -> Any:
        """Store `user`'s decision (db.review.adjudicate) in one transaction; then the next review
        screen (`move_on`), else None."""
        from db import review

        self._reviewer(user)
        with self.Session() as s:
            ann = self._annotator(s, user, create=True)
            qs = queue.query_set_by_name(s, set_name)
            queue.lock_annotator(s, ann)
            review.adjudicate(s, qs, s.get(Annotator, ann.id), task_id, answers, note, revise=revise)
            s.commit()
        return self.review_open(user, set_name) if move_on else None

    # -- the organiser's view (db/organiser.py): organisers only ------------------------------------

    def _organiser(self, user: str) -> None:
        if not self.roles.is_organiser(user):
            raise PermissionError("organisers only: the annotators file names them ('@organiser NAME')")

    def annotator_table(self, user: str, set_name: str, n_boot: int = 1000) -> dict[str, Any]:
        """The per-annotator table and drift of `set_name` (db.organiser.annotator_report)."""
        from db.organiser import annotator_report

        self._organiser(user)
        with self.ReadSession() as s:
            return annotator_report(s, set_name, n_boot=n_boot)

    def set_paused(self, user: str, annotator: str, paused: bool) -> bool:
        """Pause (or resume) `annotator`: their queue stops and their pairs return to the pool
        (db.organiser.set_paused). Returns whether they are paused now."""
        from db.organiser import set_paused

        self._organiser(user)
        with self.Session() as s:
            out = set_paused(s, annotator, paused)
            s.commit()
        return out

    def close(self) -> None:
        self.engine.dispose()
