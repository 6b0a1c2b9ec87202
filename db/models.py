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
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from db import question_schema, questions

IDENTITY_VALUES: tuple[str, ...] = questions.IDENTITY.values  # ("yes", "no", "cant_tell")
EDIT_VALUES: tuple[str, ...] = questions.EDIT.values  # ("yes", "partial", "no")
STATUS_VALUES: tuple[str, ...] = ("answered", "skipped")
REVIEW_REASONS: tuple[str, ...] = ("disagreement", "audit")
# The questions as the models read them, once, at import (db/questions.py declares them).
QUESTIONS: tuple[questions.Question, ...] = tuple(questions.QUESTIONS.values())
GOLD_QUESTIONS: tuple[questions.Question, ...] = tuple(q for q in QUESTIONS if q.gold)


def new_secret() -> str:
    """A fresh random key for a query set (64 hex digits, from the OS's CSPRNG)."""
    return secrets.token_hex(32)


def utcnow() -> datetime:
    """Timezone-aware UTC now (datetime.utcnow is deprecated)."""
    return datetime.now(timezone.utc)


def _in_list(column: str, values: tuple[str, ...]) -> str:
    return question_schema.in_list(column, values)


def core_spec() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """mode -> (name, values) of its core questions, as the registry declares them."""
    return {m: [(q.name, q.values) for q in questions.core(m)] for m in questions.MODES}


def _question_columns() -> dict[str, Any]:
    """One nullable column per declared question (added to a table's class body)."""
    return {q.name: mapped_column(String(question_schema.COLUMN_LENGTH), nullable=True) for q in QUESTIONS}


def _extra(make: Any, prefix: str) -> list[CheckConstraint]:
    """A CHECK per question that is not core (`question_schema`)."""
    return [CheckConstraint(make(q.name, q.values), name=f"{prefix}_{q.name}") for q in QUESTIONS if not q.core]


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
    # Paused by an organiser (db.organiser): no new pairs, their claims and answers no longer hold
    # a pair's overlap (the pairs return to the pool), their answers left out of the rates.
    paused_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True), nullable=True)

    judgments: Mapped[list[Judgment]] = relationship(back_populates="annotator")


class QuerySet(Base):
    """A named batch of queries from one source (e.g. "world:test", "movienet")."""

    __tablename__ = "query_sets"
    __table_args__ = (
        CheckConstraint("overlap >= 1", name="ck_query_set_overlap"),
        CheckConstraint("pool_k >= 1", name="ck_query_set_pool_k"),
        CheckConstraint(_in_list("mode", questions.MODES), name="ck_query_set_mode"),
        CheckConstraint("audit_share >= 0 AND audit_share <= 1", name="ck_query_set_audit_share"),
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
    # pointwise (a candidate beside the reference) or pairwise (candidates A and B), and the
    # questions asked (comma-separated names, db/questions.py): fixed at pooling.
    mode: Mapped[str] = mapped_column(String(16), default="pointwise", server_default="pointwise")
    questions: Mapped[str] = mapped_column(String(400), default="identity,edit", server_default="identity,edit")
    # The share of agreed pairs a reviewer also sees, for audit (db.review); disagreements always.
    audit_share: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")

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
    """A pooled (query, item) pair, or in a pairwise set a (query, item A, item B) triple; each
    annotator judges it at most once."""

    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("query_id", "item_id", "item_b_id", name="uq_task_pair"),
        CheckConstraint("item_b_id <> item_id", name="ck_task_two_items"),
        *(CheckConstraint(question_schema.gold_sql(q.name, q.values), name=f"ck_task_gold_{q.name}")
          for q in GOLD_QUESTIONS),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id", ondelete=_RESTRICT), index=True)
    item_id: Mapped[str] = mapped_column(String(200))  # pairwise: the candidate shown as A (left)
    # Pairwise: the candidate shown as B (right); '' in a pointwise set. Which side a method's item
    # is on was drawn at pooling, keyed by the set's secret (db.pooling), and is this order.
    item_b_id: Mapped[str] = mapped_column(String(200), default="", server_default=text("''"))
    # Gold items: known answers (gold_<question> per gold question), used to measure annotators.
    locals().update({f"gold_{q.name}": mapped_column(String(question_schema.COLUMN_LENGTH), nullable=True)
                     for q in GOLD_QUESTIONS})

    @property
    def is_gold(self) -> bool:
        return any(getattr(self, f"gold_{q.name}") is not None for q in GOLD_QUESTIONS)

    query: Mapped[Query] = relationship()
    judgments: Mapped[list[Judgment]] = relationship(back_populates="task")


class Judgment(Base):
    """One annotator's current answer for one task; history lives in JudgmentAudit."""

    __tablename__ = "judgments"
    __table_args__ = (
        UniqueConstraint("annotator_id", "task_id", name="uq_judgment_annotator_task"),
        CheckConstraint(_in_list("status", STATUS_VALUES), name="ck_judgment_status"),
        # An answer has its mode's core labels (db/question_schema.py); a skip has a reason and none.
        CheckConstraint(question_schema.judgment_answer_sql(core_spec()), name="ck_judgment_answer_or_skip"),
        *_extra(question_schema.judgment_extra_sql, "ck_judgment"),
        CheckConstraint("time_spent_ms >= 0", name="ck_judgment_time_nonneg"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    annotator_id: Mapped[int] = mapped_column(
        ForeignKey("annotators.id", ondelete=_RESTRICT), index=True
    )
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete=_RESTRICT), index=True)
    status: Mapped[str] = mapped_column(String(16), default="answered", server_default="answered")
    locals().update(_question_columns())  # identity, edit, ...: one per question (db/questions.py)
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
    locals().update(_question_columns())
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


class Adjudication(Base):
    """A reviewer's decision on one task, kept apart from the annotators' judgments (db.review):
    the labels that task's disagreement (or audit) ends with. One per task; a changed decision
    keeps the old one in `adjudication_audits`."""

    __tablename__ = "adjudications"
    __table_args__ = (
        UniqueConstraint("task_id", name="uq_adjudication_task"),
        CheckConstraint(_in_list("reason", REVIEW_REASONS), name="ck_adjudication_reason"),
        CheckConstraint(question_schema.adjudication_answer_sql(core_spec()), name="ck_adjudication_answer"),
        *_extra(question_schema.adjudication_extra_sql, "ck_adjudication"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete=_RESTRICT))  # unique: indexed
    reviewer_id: Mapped[int] = mapped_column(ForeignKey("annotators.id", ondelete=_RESTRICT), index=True)
    reason: Mapped[str] = mapped_column(String(16))  # why it was reviewed: disagreement or audit
    locals().update(_question_columns())
    note: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class AdjudicationAudit(Base):
    """Append-only record of a decision's previous values, written before each change."""

    __tablename__ = "adjudication_audits"

    id: Mapped[int] = mapped_column(primary_key=True)
    adjudication_id: Mapped[int] = mapped_column(ForeignKey("adjudications.id", ondelete=_RESTRICT), index=True)
    reviewer_id: Mapped[int] = mapped_column(ForeignKey("annotators.id", ondelete=_RESTRICT), index=True)
    locals().update(_question_columns())
    note: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
