"""From judgments back to methods: load one query set, score each judged (query, item), and turn a
method's ranking into one value per query.

Aggregation (documented in docs/ANNOTATION.md):
- a judgment's labels become numbers: identity yes = 1, no = 0, cant_tell = 0 (not preserved;
  its own rate is `identity_cant_tell`); edit yes = 1, partial = 0.5, no = 0 (`edit`), and
  yes-only (`edit_strict`). Skipped judgments are left out.
- per (query, item): the MEAN over the annotators who answered it (two annotators saying yes/no
  give 0.5; no tie-break rule needed, and an item does not weigh more for having more judges).
- per query and method: the rank-1 item's value (at 1), or the mean over the ranks 1..k (at k).
  A query counts at depth d only if the method has items at all ranks 1..d and every one of them
  has at least one answer; other queries are left out and reported as missing coverage.
Gold tasks count like any other: gold status only adds the annotator-accuracy check.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from cir_core.errors import InputError
from db import questions as q_registry
from db.models import QUESTIONS, Adjudication, Annotator, Judgment, Query, QuerySet, RetrievedItem, Task

Metrics = dict[str, tuple[str, dict[str, float]]]  # metric -> (question, label -> value)


def metrics_for(qs: tuple[q_registry.Question, ...] | list[q_registry.Question]) -> Metrics:
    """The report's numbers for these questions, as they declare them (db/questions.py)."""
    return {m.name: (q.name, q.metric_map(m)) for q in qs for m in q.metrics}


# The pointwise core questions' metrics (identity, identity_cant_tell, edit, edit_strict).
METRICS: Metrics = metrics_for(q_registry.core("pointwise"))


@dataclass(frozen=True)
class JudgmentRow:
    task_id: int
    annotator: str
    status: str
    identity: str | None
    edit: str | None
    skip_reason: str | None
    others: dict[str, str | None] = field(default_factory=dict, hash=False)  # the other questions' answers
    time_ms: int = 0
    created_at: object = None  # when first saved (the organiser's drift plot)

    def value(self, question: str) -> str | None:
        """This judgment's answer to `question`."""
        if question in ("identity", "edit"):
            return getattr(self, question)
        return self.others.get(question)


@dataclass
class SetData:
    """Everything the report needs from one query set, read in one short transaction."""

    name: str
    source: str
    pool_k: int
    overlap: int
    query_ids: list[int]
    # (method, scoring) -> query_id -> rank -> item_id
    rankings: dict[tuple[str, str], dict[int, dict[int, str]]]
    task_of: dict[tuple[int, str], int]  # (query_id, item_id) -> task id
    gold: dict[int, tuple[str | None, str | None]]  # task id -> (gold identity, gold edit)
    judgments: list[JudgmentRow] = field(default_factory=list)
    # task id -> the automatic identity label pooling stored (MovieNet: cast labels; the world: its truth)
    auto_identity: dict[int, str] = field(default_factory=dict)
    mode: str = "pointwise"
    questions: tuple[q_registry.Question, ...] = q_registry.core("pointwise")
    item_b: dict[int, str] = field(default_factory=dict)  # pairwise: task id -> its item B (item A in task_of)
    # task id -> (reason, question -> the reviewer's label): decisions, kept apart from the judgments
    adjudicated: dict[int, tuple[str, dict[str, str | None]]] = field(default_factory=dict)
    paused: tuple[str, ...] = ()  # annotators an organiser paused: their judgments are left out
    paused_judgments: int = 0  # how many were left out
    meta: dict = field(default_factory=dict)
    secret: str = ""  # the set's key (db.blind; never shown)
    audit_share: float = 0.0  # the share of agreed pairs reviewers also see

    @property
    def metrics(self) -> Metrics:
        return metrics_for(self.questions)


@contextmanager
def short_read(session: Session) -> Iterator[Session]:
    """Run reads and end the transaction they opened (if they opened one).

    db.sqlite starts every transaction with BEGIN IMMEDIATE, so even a read holds the write lock
    until it ends; a report must not block annotators' saves while it bootstraps. A transaction
    the caller already had open is left alone.
    """
    was_open = session.in_transaction()
    try:
        yield session
    finally:
        if not was_open and session.in_transaction():
            session.rollback()  # nothing was written; this only releases the lock


def query_set_names(session: Session) -> list[str]:
    """Names of every query set, sorted."""
    with short_read(session):
        return list(session.scalars(select(QuerySet.name).order_by(QuerySet.name)))


def load_set(session: Session, name: str, include_paused: bool = False) -> SetData:
    """Read one query set's queries, rankings, tasks, judgments and decisions (InputError if
    unknown). The judgments of paused annotators are left out (and counted) unless
    `include_paused`."""
    with short_read(session):
        return _load_set(session, name, include_paused)


def _load_set(session: Session, name: str, include_paused: bool) -> SetData:
    qs = session.scalars(select(QuerySet).where(QuerySet.name == name)).one_or_none()
    if qs is None:
        known = ", ".join(query_set_names(session)) or "none"
        raise InputError(f"no query set named {name!r} (known: {known})")
    in_set = Query.query_set_id == qs.id
    query_ids = list(session.scalars(select(Query.id).where(in_set).order_by(Query.id)))
    rankings: dict[tuple[str, str], dict[int, dict[int, str]]] = defaultdict(dict)
    rows = session.execute(
        select(RetrievedItem.method, RetrievedItem.scoring, RetrievedItem.query_id,
               RetrievedItem.rank, RetrievedItem.item_id).join(Query).where(in_set))
    for method, scoring, qid, rank, item in rows:
        rankings[(method, scoring)].setdefault(qid, {})[rank] = item
    task_of: dict[tuple[int, str], int] = {}
    gold: dict[int, tuple[str | None, str | None]] = {}
    item_b: dict[int, str] = {}
    for tid, qid, item, g_id, g_edit, b in session.execute(
            select(Task.id, Task.query_id, Task.item_id, Task.gold_identity, Task.gold_edit, Task.item_b_id)
            .join(Query).where(in_set)):
        if b:
            item_b[tid] = b
            task_of[(qid, item, b)] = tid  # pairwise: (query, A, B)
        else:
            task_of[(qid, item)] = tid
        if g_id is not None or g_edit is not None:
            gold[tid] = (g_id, g_edit)
    auto: dict[int, str] = {}
    for qid, meta in session.execute(select(Query.id, Query.meta).where(in_set)):
        for item, label in ((meta or {}).get("auto_identity") or {}).items():
            if (qid, item) in task_of and label in ("yes", "no"):
                auto[task_of[(qid, item)]] = label
    others = [q.name for q in QUESTIONS if q.name not in ("identity", "edit")]
    judgments, paused, dropped = [], set(), 0
    for j, name, paused_at in session.execute(
            select(Judgment, Annotator.name, Annotator.paused_at)
            .join(Task, Judgment.task_id == Task.id).join(Query, Task.query_id == Query.id)
            .join(Annotator, Judgment.annotator_id == Annotator.id)
            .where(in_set).order_by(Judgment.id)):
        if paused_at is not None:
            paused.add(name)
            if not include_paused:
                dropped += 1
                continue
        judgments.append(JudgmentRow(j.task_id, name, j.status, j.identity, j.edit, j.skip_reason,
                                     {o: getattr(j, o) for o in others}, j.time_spent_ms, j.created_at))
    adjudicated = {a.task_id: (a.reason, {q.name: getattr(a, q.name) for q in QUESTIONS}) for a in session.scalars(
        select(Adjudication).join(Task, Adjudication.task_id == Task.id).join(Query, Task.query_id == Query.id)
        .where(in_set))}
    return SetData(qs.name, qs.source, qs.pool_k, qs.overlap, query_ids, dict(rankings),
                   task_of, gold, judgments, auto, qs.mode, q_registry.for_set(qs.mode, qs.questions), item_b,
                   adjudicated, tuple(sorted(paused)), dropped, dict(qs.meta or {}), qs.secret,
                   float(qs.audit_share or 0.0))


def item_scores(judgments: list[JudgmentRow], metrics: Metrics | None = None) -> dict[int, dict[str, float]]:
    """task id -> metric -> mean over the annotators who answered it (skips ignored; a metric
    over the answers that have its question). Default metrics: the pointwise core questions'."""
    metrics = METRICS if metrics is None else metrics
    sums: dict[int, dict[str, float]] = defaultdict(dict)
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for j in judgments:
        if j.status != "answered":
            continue
        for metric, (attr, values) in metrics.items():
            v = j.value(attr)
            if v in values:
                sums[j.task_id][metric] = sums[j.task_id].get(metric, 0.0) + values[v]
                counts[j.task_id][metric] = counts[j.task_id].get(metric, 0) + 1
    return {t: {m: s / counts[t][m] for m, s in sums[t].items()} for t in sums if sums[t]}


def per_query_values(data: SetData, scores: dict[int, dict[str, float]],
                     method_scoring: tuple[str, str], depth: int, metrics: list[str] | None = None
                     ) -> tuple[list[int], dict[str, np.ndarray]]:
    """The queries this method covers at `depth`, and per metric (default: the set's) one value
    per covered query."""
    if depth < 1:
        raise InputError(f"depth must be >= 1, got {depth}")
    ranking = data.rankings.get(method_scoring, {})
    metrics = list(data.metrics) if metrics is None else metrics
    covered: list[int] = []
    values: dict[str, list[float]] = {m: [] for m in metrics}
    for qid in data.query_ids:
        ranks = ranking.get(qid, {})
        items = [ranks.get(r) for r in range(1, depth + 1)]
        tasks = [data.task_of.get((qid, it)) for it in items if it is not None]
        if len(tasks) < depth or any(t is None or t not in scores for t in tasks) \
                or any(m not in scores[t] for t in tasks for m in metrics):
            continue
        covered.append(qid)
        for m in metrics:
            values[m].append(float(np.mean([scores[t][m] for t in tasks])))
    return covered, {m: np.asarray(v, dtype=np.float64) for m, v in values.items()}


def label_matrix(data: SetData, attr: str) -> tuple[np.ndarray, list[str]]:
    """(tasks x annotators) object matrix of `attr` answers, None where not answered."""
    answered = [j for j in data.judgments if j.status == "answered"]
    annotators = sorted({j.annotator for j in answered})
    tasks = sorted({j.task_id for j in answered})
    col = {a: i for i, a in enumerate(annotators)}
    row = {t: i for i, t in enumerate(tasks)}
    mat = np.full((len(tasks), len(annotators)), None, dtype=object)
    for j in answered:
        mat[row[j.task_id], col[j.annotator]] = j.value(attr)
    return mat, annotators
