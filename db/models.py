"""SQLite schema for blind, attributable annotation of composed-image-retrieval results.

An annotator judges a pooled (query, item) `Task`; `RetrievedItem` remembers which method /
scoring put that item at which rank, so judgments stay blind to the method and are joined back
to methods only at analysis time.
"""
from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import (
    JSON,
    MetaData,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from db import questions

IDENTITY_VALUES: tuple[str, ...] = questions.IDENTITY.values  # ("yes", "no", "cant_tell")
EDIT_VALUES: tuple[str, ...] = questions.EDIT.values  # ("yes", "partial", "no")
STATUS_VALUES: tuple[str, ...] = ("answered", "skipped")


def new_secret() -> str:
    """A fresh random key for a query set (64 hex digits, from the OS's CSPRNG)."""
    return secrets.token_hex(32)


def utcnow() -> datetime:
    """Timezone-aware UTC now (datetime.utcnow is deprecated)."""
    return datetime.now(timezone.utc)


def _in_list(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base shared by every annotation table."""

    # Names for the constraints declared without one (unique=True columns, foreign keys), so a
    # later batch migration can drop or alter them by name. Explicit names are kept as they are.
    metadata = MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",  # SQLAlchemy's default, which a custom convention replaces
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
    })


# RESTRICT everywhere: deleting a parent that judgments depend on must fail, never cascade.
_RESTRICT = "RESTRICT"


class Annotator(Base):
    """A person who judges tasks."""

    __tablename__ = "annotators"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    judgments: Mapped[list[Judgment]] = relationship(back_populates="annotator")


class QuerySet(Base):
    """A named batch of queries from one source (e.g. "world:test", "movienet")."""

    __tablename__ = "query_sets"
    __table_args__ = (
        CheckConstraint("overlap >= 1", name="ck_query_set_overlap"),
        CheckConstraint("pool_k >= 1", name="ck_query_set_pool_k"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source: Mapped[str] = mapped_column(String(200))
    # How many different annotators judge each (non-gold) task; gold tasks go to everyone.
    overlap: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    pool_k: Mapped[int] = mapped_column(Integer, default=10, server_default="10")
    # Methods, scorings, backbone, gallery: what the pool was built from (reproducibility).
    meta: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The set's own random key (hex), never shown: it seeds each annotator's order and where their
    # gold pairs fall, and keys the opaque ids of their export (db/blind.py). A public seed (the
    # names) could be replayed by an annotator to read the gallery's layout back from the order.
    secret: Mapped[str] = mapped_column(String(64), default=lambda: new_secret())

    queries: Mapped[list[Query]] = relationship(back_populates="query_set")


class Query(Base):
    """One CIR query: a reference image plus an edit text."""

    __tablename__ = "queries"
    __table_args__ = (UniqueConstraint("query_set_id", "external_id", name="uq_query_external"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    query_set_id: Mapped[int] = mapped_column(
        ForeignKey("query_sets.id", ondelete=_RESTRICT), index=True
    )
    external_id: Mapped[str] = mapped_column(String(200))
    reference_id: Mapped[str] = mapped_column(String(200))
    edit_text: Mapped[str] = mapped_column(Text)
    meta: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON, nullable=True)

    query_set: Mapped[QuerySet] = relationship(back_populates="queries")


class RetrievedItem(Base):
    """Which method/scoring retrieved which item at which rank (never shown to annotators)."""

    __tablename__ = "retrieved_items"
    __table_args__ = (
        UniqueConstraint("query_id", "method", "scoring", "rank", name="uq_retrieved_rank"),
        CheckConstraint("rank >= 1", name="ck_retrieved_rank_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id", ondelete=_RESTRICT), index=True)
    method: Mapped[str] = mapped_column(String(100))
    scoring: Mapped[str] = mapped_column(String(100))
    rank: Mapped[int] = mapped_column(Integer)
    item_id: Mapped[str] = mapped_column(String(200))
    score: Mapped[Optional[float]] = mapped_column(Float, nullable=True)

    query: Mapped[Query] = relationship()


class Task(Base):
    """A pooled (query, item) pair; each annotator judges it at most once."""

    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("query_id", "item_id", name="uq_task_pair"),
        CheckConstraint(f"gold_identity IS NULL OR {_in_list('gold_identity', IDENTITY_VALUES)}",
                        name="ck_task_gold_identity"),
        CheckConstraint(f"gold_edit IS NULL OR {_in_list('gold_edit', EDIT_VALUES)}",
                        name="ck_task_gold_edit"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id", ondelete=_RESTRICT), index=True)
    item_id: Mapped[str] = mapped_column(String(200))
    # Gold items: known answers, shown to every annotator, used to measure annotator accuracy.
    gold_identity: Mapped[Optional[str]] = mapped_column(String(16), nullable=True)
    gold_edit: Mapped[Optional[str]] = mapped_column(String(16), nullable=True)

    @property
    def is_gold(self) -> bool:
        return self.gold_identity is not None or self.gold_edit is not None

    query: Mapped[Query] = relationship()
    judgments: Mapped[list[Judgment]] = relationship(back_populates="task")


class Judgment(Base):
    """One annotator's current answer for one task; history lives in JudgmentAudit."""

    __tablename__ = "judgments"
    __table_args__ = (
        UniqueConstraint("annotator_id", "task_id", name="uq_judgment_annotator_task"),
        CheckConstraint(_in_list("status", STATUS_VALUES), name="ck_judgment_status"),
        # An answer has both labels; a skip has a reason and no labels. The explicit IS NOT NULLs
        # matter: `NULL IN (...)` is NULL, and a CHECK that evaluates to NULL passes.
        CheckConstraint(
            "(status = 'answered' AND identity IS NOT NULL AND edit IS NOT NULL "
            f"AND {_in_list('identity', IDENTITY_VALUES)} "
            f"AND {_in_list('edit', EDIT_VALUES)}) OR "
            "(status = 'skipped' AND identity IS NULL AND edit IS NULL "
            "AND skip_reason IS NOT NULL AND length(trim(skip_reason)) > 0)",
            name="ck_judgment_answer_or_skip"),
        CheckConstraint("time_spent_ms >= 0", name="ck_judgment_time_nonneg"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    annotator_id: Mapped[int] = mapped_column(
        ForeignKey("annotators.id", ondelete=_RESTRICT), index=True
    )
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete=_RESTRICT), index=True)
    status: Mapped[str] = mapped_column(String(16), default="answered", server_default="answered")
    identity: Mapped[Optional[str]] = mapped_column(String(16), nullable=True)
    edit: Mapped[Optional[str]] = mapped_column(String(16), nullable=True)
    skip_reason: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    comment: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    time_spent_ms: Mapped[int] = mapped_column(Integer, default=0)
    # Where the item sat on the annotator's screen: lets us check for position bias later.
    shown_position: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )

    annotator: Mapped[Annotator] = relationship(back_populates="judgments")
    task: Mapped[Task] = relationship(back_populates="judgments")
    audits: Mapped[list[JudgmentAudit]] = relationship(back_populates="judgment")


class JudgmentAudit(Base):
    """Append-only record of a judgment's previous values, written before each change."""

    __tablename__ = "judgment_audits"

    id: Mapped[int] = mapped_column(primary_key=True)
    judgment_id: Mapped[int] = mapped_column(
        ForeignKey("judgments.id", ondelete=_RESTRICT), index=True
    )
    status: Mapped[str] = mapped_column(String(16), default="answered", server_default="answered")
    identity: Mapped[Optional[str]] = mapped_column(String(16), nullable=True)
    edit: Mapped[Optional[str]] = mapped_column(String(16), nullable=True)
    skip_reason: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    comment: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    judgment: Mapped[Judgment] = relationship(back_populates="audits")


class Assignment(Base):
    """A task put in an annotator's queue, at the position it was shown (their own random order).

    Created when the task is first shown, so a refresh or a return the next day resumes on the
    same task; `position` is what back/undo walks and what position-bias checks read."""

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("annotator_id", "task_id", name="uq_assignment_annotator_task"),
        UniqueConstraint("annotator_id", "query_set_id", "position", name="uq_assignment_position"),
        CheckConstraint("position >= 1", name="ck_assignment_position"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    annotator_id: Mapped[int] = mapped_column(
        ForeignKey("annotators.id", ondelete=_RESTRICT), index=True
    )
    query_set_id: Mapped[int] = mapped_column(
        ForeignKey("query_sets.id", ondelete=_RESTRICT), index=True
    )
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete=_RESTRICT), index=True)
    position: Mapped[int] = mapped_column(Integer)
    assigned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    task: Mapped[Task] = relationship()


class GoldFeedback(Base):
    """The gold accuracy an annotator was shown for a set, frozen the first time it was shown.

    Computed live, it is an oracle: flip one answer through Back, read the count again, and it
    tells whether that pair is gold and what its answer is. So it is computed once, when the
    annotator has finished the set and first asks, and this row is what they see from then on."""

    __tablename__ = "gold_feedback"
    __table_args__ = (
        UniqueConstraint("annotator_id", "query_set_id", name="uq_gold_feedback_annotator_set"),
        CheckConstraint("identity_correct >= 0 AND identity_correct <= identity_n AND "
                        "edit_correct >= 0 AND edit_correct <= edit_n AND skipped >= 0",
                        name="ck_gold_feedback_counts"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id", ondelete=_RESTRICT), index=True)
    query_set_id: Mapped[int] = mapped_column(ForeignKey("query_sets.id", ondelete=_RESTRICT), index=True)
    identity_correct: Mapped[int] = mapped_column(Integer)
    identity_n: Mapped[int] = mapped_column(Integer)
    edit_correct: Mapped[int] = mapped_column(Integer)
    edit_n: Mapped[int] = mapped_column(Integer)
    skipped: Mapped[int] = mapped_column(Integer)
    shown_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
