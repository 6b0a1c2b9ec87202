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

from sqlalchemy import select

from db import queue
from db.migrate import init_db
from db.sqlite import open_db, session_factory
from db.models import QuerySet

if TYPE_CHECKING:
    from cir_core.engine import Engine

log = logging.getLogger(__name__)

DEFAULT_SET = "world-demo"
DEFAULT_QUERIES, DEFAULT_K, DEFAULT_GOLD = 30, 5, 0.1
SKIP_REASONS = ("reference unclear", "candidate unclear", "edit text unclear", "other")


@dataclass(frozen=True)
class QueueState:
    """One screen of the Annotate tab: the task at `task.position`, and where the queue stands."""

    user: str
    query_set: str
    task: queue.TaskView | None  # None: this annotator has finished the set
    progress: queue.Progress  # progress.latest: the highest position assigned so far


class AnnotationService:
    """The annotation DB behind the app (thread-safe: one SQLAlchemy engine, short transactions)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        if self.path.parent and not self.path.parent.exists():
            raise FileNotFoundError(f"annotation DB folder {self.path.parent} does not exist")
        self.engine = open_db(self.path)
        init_db(self.engine)
        self.Session = session_factory(self.engine)
        self._pool_lock = threading.Lock()

    def query_sets(self) -> list[str]:
        with self.Session() as s:
            return list(s.scalars(select(QuerySet.name).order_by(QuerySet.id)))

    def ensure_default_set(self, cir_engine: Engine, progress: Callable | None = None) -> str | None:
        """Pool the world demo set on first use when the DB has no query set at all (a fresh clone
        then has something to annotate). None when the gallery is not the world."""
        if self.query_sets() or getattr(cir_engine, "bench", None) is None:
            return None
        from cir_core.engine.core import SHOWCASE
        from db.pooling import pool_query_set, world_queries

        with self._pool_lock:
            if self.query_sets():
                return None
            with self.Session() as s:
                qs = pool_query_set(s, cir_engine, DEFAULT_SET,
                                    world_queries(cir_engine, DEFAULT_QUERIES, skip=SHOWCASE),
                                    list(cir_engine.columns), k=DEFAULT_K, gold_fraction=DEFAULT_GOLD,
                                    source="world:test", progress=progress)
                log.info("pooled the default annotation set %r", qs.name)
                return qs.name

    def _state(self, s: Any, ann: Any, qs: QuerySet, task: queue.TaskView | None) -> QueueState:
        return QueueState(ann.name, qs.name, task, queue.progress(s, ann, qs))

    def open(self, user: str, set_name: str, position: int | None = None) -> QueueState:
        """The current task (None position), or this user's task at `position` (back/undo)."""
        with self.Session() as s:
            ann = queue.get_or_create_annotator(s, user)
            qs = queue.query_set_by_name(s, set_name)
            task = None
            if position is not None:
                task = queue.at_position(s, ann, qs, int(position))
            if task is None:
                task = queue.current(s, ann, qs)
            return self._state(s, ann, qs, task)

    def answer(self, user: str, set_name: str, task_id: int, identity: str, edit: str,
               comment: str | None = None, time_spent_ms: int = 0) -> QueueState:
        """Save the answer, then move on to the current task."""
        with self.Session() as s:
            ann = queue.get_or_create_annotator(s, user)
            qs = queue.query_set_by_name(s, set_name)
            queue.answer(s, ann, int(task_id), identity, edit, comment, time_spent_ms)
            return self._state(s, ann, qs, queue.current(s, ann, qs))

    def skip(self, user: str, set_name: str, task_id: int, reason: str, time_spent_ms: int = 0) -> QueueState:
        with self.Session() as s:
            ann = queue.get_or_create_annotator(s, user)
            qs = queue.query_set_by_name(s, set_name)
            queue.skip(s, ann, int(task_id), reason, time_spent_ms)
            return self._state(s, ann, qs, queue.current(s, ann, qs))

    def close(self) -> None:
        self.engine.dispose()
