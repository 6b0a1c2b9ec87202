"""A task's final labels: what the campaign concludes about each pair, from the raw judgments and
the reviewers' decisions (kept apart, in `adjudications`).

- **raw majority**, per question: the most frequent answer among the annotators who answered;
  a tie (two or more answers equally frequent) has none.
- **adjudicated**: the reviewer's decision where there is one, else the raw majority.

A task's `source` says which: `adjudicated`, `majority` (every question has one), `tie` (some
question has none and no reviewer decided: an *open tie*), `unjudged` (no answer yet).

As numbers (the report's metrics, db/questions.py): a label's value; a tie's value is the mean
of the tied labels' values (a yes/no tie on identity is 0.5, as the mean over two annotators is).

As qrels grades (`grade`, db.export --format qrels): the set's graded `relevance` answer where it
asks one, else identity x edit:

    identity \\ edit   yes   partial   no
    yes                3      2       1
    no, cant_tell      0      0       0

A tied question takes the lower of its tied grades (documented in docs/ANNOTATION.md, "Qrels").
"""
from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass

from db.results import Metrics, SetData

GRADES = {("yes", "yes"): 3, ("yes", "partial"): 2, ("yes", "no"): 1}
MAX_GRADE = 3


@dataclass(frozen=True)
class Final:
    """One task's conclusion: per question the final label (None: tie or unanswered), the raw
    majority (None on a tie), the answers that tied, and where the final labels come from."""

    labels: dict[str, str | None]
    majority: dict[str, str | None]
    tied: dict[str, tuple[str, ...]]  # question -> the answers that tied for first (empty: none)
    source: str  # adjudicated | majority | tie | unjudged
    n_answers: int


def votes(data: SetData) -> dict[int, dict[str, Counter]]:
    """task id -> question -> Counter of the answers (answered judgments of the set's questions)."""
    out: dict[int, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for j in data.judgments:
        if j.status != "answered":
            continue
        for q in data.questions:
            v = j.value(q.name)
            if v is not None:
                out[j.task_id][q.name][v] += 1
    return out


def top(counter: Counter) -> tuple[str, ...]:
    """The answers tied for first (one: a majority)."""
    if not counter:
        return ()
    best = max(counter.values())
    return tuple(sorted(v for v, n in counter.items() if n == best))


def answers_per_task(data: SetData) -> Counter:
    return Counter(j.task_id for j in data.judgments if j.status == "answered")


def final_labels(data: SetData) -> dict[int, Final]:
    """Every task of the set's conclusion (module docstring)."""
    v, n = votes(data), answers_per_task(data)
    out = {}
    for task in data.task_of.values():
        tops = {q.name: top(v.get(task, {}).get(q.name, Counter())) for q in data.questions}
        majority = {q: (t[0] if len(t) == 1 else None) for q, t in tops.items()}
        tied = {q: t for q, t in tops.items() if len(t) > 1}
        if task in data.adjudicated:
            decided = data.adjudicated[task][1]
            out[task] = Final({q.name: decided.get(q.name) for q in data.questions}, majority, tied,
                              "adjudicated", n[task])
        elif not n[task]:
            out[task] = Final(majority, majority, tied, "unjudged", 0)
        else:
            out[task] = Final(majority, majority, tied, "tie" if tied else "majority", n[task])
    return out


def label_scores(data: SetData, finals: dict[int, Final], kind: str,
                 metrics: Metrics | None = None) -> dict[int, dict[str, float]]:
    """task id -> metric -> value of its `kind` label ("majority" or "adjudicated"), ties as the
    mean of the tied labels' values; unanswered tasks left out (as `item_scores` leaves them)."""
    if kind not in ("majority", "adjudicated"):
        raise ValueError(f"kind must be majority or adjudicated, got {kind!r}")
    metrics = data.metrics if metrics is None else metrics
    out: dict[int, dict[str, float]] = {}
    for task, f in finals.items():
        if f.n_answers == 0 and f.source != "adjudicated":
            continue
        labels = f.labels if kind == "adjudicated" else f.majority
        row = {}
        for metric, (q, values) in metrics.items():
            options = [labels.get(q)] if labels.get(q) is not None else list(f.tied.get(q, ()))
            options = [o for o in options if o in values]
            if options:
                row[metric] = sum(values[o] for o in options) / len(options)
        out[task] = row
    return out


def grade(f: Final, asks_relevance: bool) -> int | None:
    """The qrels grade of a task's final labels (module docstring); None when unjudged."""
    if f.source == "unjudged":
        return None

    def options(q: str) -> list[str]:
        return [f.labels[q]] if f.labels.get(q) is not None else list(f.tied.get(q, ()))

    if asks_relevance and options("relevance"):
        return min(int(v) for v in options("relevance"))
    ids, edits = options("identity"), options("edit")
    if not ids or not edits:
        return None
    return min(GRADES.get((i, e), 0) for i, e in itertools.product(ids, edits))
