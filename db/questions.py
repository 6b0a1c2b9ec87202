"""The annotation questions, declared once: each one's stored values, the words on its buttons,
its hotkeys, its help, how the report turns its answers into numbers, and whether tasks may
carry a known (gold) answer. Everything that asks, stores, checks, reports or exports an answer
reads it from here:

- the models (`db.models`): one column per question in `judgments`, `judgment_audits`,
  `adjudications` and `adjudication_audits` (and `tasks.gold_<name>` for a gold question), each
  with a CHECK on its values; a migration adds them (`db.question_schema.add_question`);
- validation (`db.judgments`), the Annotate and Review tabs (a row of buttons per question, its
  keys, its words in the status), the report (`metrics`), the exports and the published dataset.

A query set asks the questions of one *mode* (`QuerySet.mode`): **pointwise** (one candidate beside
the reference: identity and edit, optionally the graded relevance) or **pairwise** (two candidates,
A and B: which one does what was asked). A mode's `core` questions are always asked in its sets;
the others only where the set lists them (`QuerySet.questions`).

Adding a question is this declaration plus a migration (tests/test_questions.py does both):

    declare(Question("urgency", "How urgent?", (Choice("low", "Low", "J"), Choice("high", "High", "K")),
                     help="...", metrics=(Metric("urgent", (0.0, 1.0)),)))
    # db/migrations/versions/00NN_urgency.py: upgrade() -> add_question("urgency", ("low", "high"))
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MODES = ("pointwise", "pairwise")
RESERVED_KEYS = frozenset("SBN")  # skip, back, next (the Annotate tab's own keys)
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
VALUE_RE = re.compile(r"[a-z0-9_]{1,16}")
# Column names a question may not take (the judgments table's own columns and the models' helpers).
TAKEN = frozenset({"id", "annotator_id", "task_id", "status", "skip_reason", "comment", "time_spent_ms",
                   "shown_position", "created_at", "updated_at", "reviewer_id", "reason", "note", "task",
                   "annotator", "audits", "judgment_id", "adjudication_id", "changed_at", "query_id",
                   "item_id", "item_b_id", "gold", "answers", "mode", "questions"})


@dataclass(frozen=True)
class Choice:
    value: str  # what the database stores
    label: str  # the button's words
    key: str  # its hotkey (one character, shown on the button)


@dataclass(frozen=True)
class Metric:
    """A number the report averages per (query, item): one value per choice, in choice order."""

    name: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class Question:
    name: str  # the judgment's column
    prompt: str
    choices: tuple[Choice, ...]
    help: str = ""  # what the guidelines say about it (Annotate tab, the dataset card)
    mode: str = "pointwise"
    core: bool = False  # always asked in its mode's sets (the others: where a set lists them)
    gold: bool = False  # tasks may carry its known answer (`tasks.gold_<name>`)
    metrics: tuple[Metric, ...] = ()
    elem: str = ""  # the buttons' element id part (`ann-<elem>-<value>`; default: the name)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c.value for c in self.choices)

    @property
    def element(self) -> str:
        return self.elem or self.name

    def label(self, value: str | None) -> str:
        """The button's words for a stored value (the value itself when unknown)."""
        return next((c.label for c in self.choices if c.value == value), str(value))

    def metric_map(self, metric: Metric) -> dict[str, float]:
        return dict(zip(self.values, metric.values))


IDENTITY = Question(
    "identity", "Does the candidate show the same character as the reference?", (
        Choice("yes", "Same character", "1"), Choice("no", "Different character", "2"),
        Choice("cant_tell", "Can't tell", "3")),
    help="does the *candidate* show **the reference's character** anywhere in the frame? *Can't tell* "
         "only when the candidate is too small, cut off or hidden to decide.",
    core=True, gold=True, elem="id",
    metrics=(Metric("identity", (1.0, 0.0, 0.0)), Metric("identity_cant_tell", (0.0, 0.0, 1.0))))
EDIT = Question(
    "edit", "Does the candidate satisfy the edit?", (
        Choice("yes", "Edit satisfied", "Q"), Choice("partial", "Partly", "W"), Choice("no", "Not satisfied", "E")),
    help="does the candidate satisfy **the edit text** applied to the reference? *Satisfied*: every change "
         "asked for is there and nothing else asked to stay was changed. *Partly*: some of the requested "
         "changes are there, or one is there only approximately. *Not satisfied*: none of them, or the "
         "candidate contradicts the edit.",
    core=True, gold=True,
    metrics=(Metric("edit", (1.0, 0.5, 0.0)), Metric("edit_strict", (1.0, 0.0, 0.0))))
RELEVANCE = Question(
    "relevance", "How well does the candidate answer the query as a whole (0-3)?", (
        Choice("0", "0 · Not relevant", "Z"), Choice("1", "1 · Marginal", "X"), Choice("2", "2 · Relevant", "C"),
        Choice("3", "3 · Highly relevant", "V")),
    help="a graded judgment of the candidate as an answer to the query (the reference's character with the "
         "edit applied): **3** exactly what was asked, **2** the character with the edit mostly there, "
         "**1** related (the character, the edit missing; or the edit on someone else), **0** unrelated.",
    metrics=(Metric("relevance", (0.0, 1 / 3, 2 / 3, 1.0)), Metric("relevant", (0.0, 0.0, 1.0, 1.0))))
PREFERENCE = Question(
    "preference", "Which candidate shows the reference's character with the edit applied?", (
        Choice("a", "A", "1"), Choice("b", "B", "2"), Choice("both", "Both", "3"), Choice("neither", "Neither", "4")),
    help="two candidates, **A** (left) and **B** (right), for one reference and edit: choose the one that "
         "shows the reference's character **and** satisfies the edit; *Both* when both do, *Neither* when "
         "neither does. Which side a method's result is on is drawn at random for every pair.",
    mode="pairwise", core=True, elem="pref")

QUESTIONS: dict[str, Question] = {}


def question_problem(q: Question, known: dict[str, Question]) -> str | None:
    """Why `q` cannot be declared beside `known`, or None."""
    if not isinstance(q.name, str) or not NAME_RE.fullmatch(q.name) or q.name in TAKEN \
            or q.name.startswith("gold_"):
        return f"question name {q.name!r}: lower-case letters, digits and _, not a column the tables already have"
    if q.name in known:
        return f"question {q.name!r} is declared twice"
    if q.mode not in MODES:
        return f"question {q.name!r}: mode must be one of {MODES}, got {q.mode!r}"
    if len(q.choices) < 2:
        return f"question {q.name!r} needs at least two choices"
    if len(set(q.values)) != len(q.values) or not all(VALUE_RE.fullmatch(v) for v in q.values):
        return f"question {q.name!r}: values must be distinct, 1-16 of a-z 0-9 _"
    keys = [c.key.upper() for c in q.choices]
    if any(len(k) != 1 for k in keys) or len(set(keys)) != len(keys):
        return f"question {q.name!r}: each choice needs its own one-character hotkey"
    if RESERVED_KEYS & set(keys):
        return f"question {q.name!r}: keys {sorted(RESERVED_KEYS & set(keys))} are the tab's own (skip, back, next)"
    taken = {c.key.upper(): o.name for o in known.values() if o.mode == q.mode for c in o.choices}
    clash = sorted(k for k in keys if k in taken)
    if clash:
        return f"question {q.name!r}: key(s) {clash} already answer {taken[clash[0]]!r} in {q.mode} sets"
    if any(len(m.values) != len(q.choices) for m in q.metrics):
        return f"question {q.name!r}: every metric needs one number per choice"
    return None


def declare(q: Question) -> Question:
    """Register a question (before `db.models` is imported: the models read the registry once)."""
    problem = question_problem(q, QUESTIONS)
    if problem:
        raise ValueError(problem)
    QUESTIONS[q.name] = q
    return q


for _q in (IDENTITY, EDIT, RELEVANCE, PREFERENCE):
    declare(_q)


def core(mode: str) -> tuple[Question, ...]:
    """The questions every set of `mode` asks."""
    return tuple(q for q in QUESTIONS.values() if q.mode == mode and q.core)


def for_set(mode: str, names: str | list[str] | tuple[str, ...] | None) -> tuple[Question, ...]:
    """The questions a set of `mode` asks, in declaration order: its core ones and those `names`
    lists (a comma-separated string or a list); ValueError naming an unknown or other-mode one."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    listed = [n.strip() for n in (names.split(",") if isinstance(names, str) else names or ()) if n.strip()]
    for n in listed:
        if n not in QUESTIONS:
            raise ValueError(f"unknown question {n!r}; declared: {', '.join(QUESTIONS)}")
        if QUESTIONS[n].mode != mode:
            raise ValueError(f"question {n!r} is asked in {QUESTIONS[n].mode} sets, not {mode} ones")
    return tuple(q for q in QUESTIONS.values() if q.mode == mode and (q.core or q.name in listed))


def names(qs: tuple[Question, ...] | list[Question]) -> str:
    """The comma-separated names a set stores (`QuerySet.questions`)."""
    return ",".join(q.name for q in qs)


def value_of(label: str) -> str | None:
    """The stored value behind a button's words, in any question (None when no button says it)."""
    return next((c.value for q in QUESTIONS.values() for c in q.choices if c.label == label), None)


def guidelines(qs: tuple[Question, ...] | list[Question]) -> str:
    """The questions' part of the guidelines, numbered (the Annotate tab, the dataset card)."""
    return "\n".join(f"{i}. **{q.name.capitalize()}** — {q.help}" for i, q in enumerate(qs, 1))
