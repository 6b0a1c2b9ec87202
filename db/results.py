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
from db.models import Annotator, Judgment, Query, QuerySet, RetrievedItem, Task

# metric -> (judgment field, label -> value)
METRICS: dict[str, tuple[str, dict[str, float]]] = {
    "identity": ("identity", {"yes": 1.0, "no": 0.0, "cant_tell": 0.0}),
    "identity_cant_tell": ("identity", {"yes": 0.0, "no": 0.0, "cant_tell": 1.0}),
    "edit": ("edit", {"yes": 1.0, "partial": 0.5, "no": 0.0}),
    "edit_strict": ("edit", {"yes": 1.0, "partial": 0.0, "no": 0.0}),
}


@dataclass(frozen=True)
class JudgmentRow:
    task_id: int
    annotator: str
    status: str
    identity: str | None
    edit: str | None
    skip_reason: str | None


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


def load_set(session: Session, name: str) -> SetData:
    """Read one query set's queries, rankings, tasks and judgments (InputError if unknown)."""
    with short_read(session):
        return _load_set(session, name)


def _load_set(session: Session, name: str) -> SetData:
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
    for tid, qid, item, g_id, g_edit in session.execute(
            select(Task.id, Task.query_id, Task.item_id, Task.gold_identity, Task.gold_edit)
            .join(Query).where(in_set)):
        task_of[(qid, item)] = tid
        if g_id is not None or g_edit is not None:
            gold[tid] = (g_id, g_edit)
    auto: dict[int, str] = {}
    for qid, meta in session.execute(select(Query.id, Query.meta).where(in_set)):
        for item, label in ((meta or {}).get("auto_identity") or {}).items():
            if (qid, item) in task_of and label in ("yes", "no"):
                auto[task_of[(qid, item)]] = label
    judgments = [JudgmentRow(*r) for r in session.execute(
        select(Judgment.task_id, Annotator.name, Judgment.status, Judgment.identity,
               Judgment.edit, Judgment.skip_reason)
        .join(Task, Judgment.task_id == Task.id).join(Query, Task.query_id == Query.id)
        .join(Annotator, Judgment.annotator_id == Annotator.id)
        .where(in_set).order_by(Judgment.id))]
    return SetData(qs.name, qs.source, qs.pool_k, qs.overlap, query_ids, dict(rankings),
                   task_of, gold, judgments, auto)


def item_scores(judgments: list[JudgmentRow]) -> dict[int, dict[str, float]]:
    """task id -> metric -> mean over the annotators who answered it (skips ignored)."""
    sums: dict[int, dict[str, float]] = defaultdict(lambda: dict.fromkeys(METRICS, 0.0))
    counts: dict[int, int] = defaultdict(int)
    for j in judgments:
        if j.status != "answered":
            continue
        counts[j.task_id] += 1
        for metric, (attr, values) in METRICS.items():
            sums[j.task_id][metric] += values[getattr(j, attr)]
    return {t: {m: s / counts[t] for m, s in sums[t].items()} for t in counts}


def per_query_values(data: SetData, scores: dict[int, dict[str, float]],
                     method_scoring: tuple[str, str], depth: int
                     ) -> tuple[list[int], dict[str, np.ndarray]]:
    """The queries this method covers at `depth`, and per metric one value per covered query."""
    if depth < 1:
        raise InputError(f"depth must be >= 1, got {depth}")
    ranking = data.rankings.get(method_scoring, {})
    covered: list[int] = []
    values: dict[str, list[float]] = {m: [] for m in METRICS}
    for qid in data.query_ids:
        ranks = ranking.get(qid, {})
        items = [ranks.get(r) for r in range(1, depth + 1)]
        tasks = [data.task_of.get((qid, it)) for it in items if it is not None]
        if len(tasks) < depth or any(t is None or t not in scores for t in tasks):
            continue
        covered.append(qid)
        for m in METRICS:
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
        mat[row[j.task_id], col[j.annotator]] = getattr(j, attr)
    return mat, annotators
