"""Writing and reading judgments: validated upsert (an answer or a skip) with an audit trail,
per-annotator reads."""
from __future__ import annotations

from typing import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from db import questions as q_registry
from db.models import QUESTIONS, Judgment, JudgmentAudit, utcnow

Answers = Mapping[str, "str | None"]  # question name -> stored value

MAX_COMMENT_CHARS = 2000
# `upsert_judgment(expected=UNCHECKED)`: no check of what the screen showed (scripts, the stress server).
UNCHECKED = object()


class StaleAnswer(LookupError):
    """The judgment changed after the screen that sent this answer was shown (another tab or
    window of the same annotator saved meanwhile): nothing is written."""


def revision_of(judgment: Judgment | None) -> str | None:
    """What a screen remembers of the judgment it showed: None (not judged yet) or its last
    change's time, as the database returns it (compared exactly, never parsed)."""
    if judgment is None:
        return None
    return judgment.updated_at.replace(tzinfo=None).isoformat(timespec="microseconds")


def text_problem(name: str, value: str) -> str | None:
    """Why `value` cannot be stored as free text, or None: control characters (NUL among them,
    which PostgreSQL refuses outright and SQLite stores) other than tab and newlines."""
    bad = sorted({c for c in value if (ord(c) < 32 and c not in "\t\n\r") or 0x7f <= ord(c) < 0xa0})
    if bad:
        shown = ", ".join(f"U+{ord(c):04X}" for c in bad[:5])
        return f"the {name} contains a control character ({shown}) that cannot be stored: remove it"
    return None


def _check_int(name: str, value: object, minimum: int | None = None) -> None:
    # bool is an int subclass; reject it so a UI bug can't store True as 1 ms.
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"{name} must be an int{bound}, got {value!r}")


def merge_answers(identity: str | None, edit: str | None, answers: Answers | None) -> dict[str, str | None]:
    """identity and edit (the old positional pair) and `answers` as one question -> value dict."""
    out = dict(answers or {})
    for name, value in (("identity", identity), ("edit", edit)):
        if value is not None:
            if out.get(name) not in (None, value):
                raise ValueError(f"{name} given twice: {value!r} and {out[name]!r}")
            out[name] = value
    return out


def asked_by(answers: Answers) -> tuple[q_registry.Question, ...]:
    """The questions an answer without a set (scripts, db.serve) must answer: its mode's core
    ones (the mode of the core question it answers; pointwise when none) and the others it gives."""
    given = [n for n, v in answers.items() if v is not None]
    modes = {q_registry.QUESTIONS[n].mode for n in given if n in q_registry.QUESTIONS and q_registry.QUESTIONS[n].core}
    mode = modes.pop() if len(modes) == 1 else "pointwise"
    return q_registry.for_set(mode, [n for n in given if n in q_registry.QUESTIONS
                                     and q_registry.QUESTIONS[n].mode == mode])


def check_answers(answers: Answers, asked: Sequence[q_registry.Question]) -> dict[str, str | None]:
    """Every question of `asked` answered with one of its values, nothing else; the full
    question -> value dict (None for the questions not asked). ValueError naming the question."""
    known = {q.name for q in QUESTIONS}
    for name in answers:
        if name not in known:
            raise ValueError(f"no question named {name!r} (declared: {', '.join(sorted(known))})")
    names = {q.name for q in asked}
    for q in asked:
        if answers.get(q.name) not in q.values:
            raise ValueError(f"{q.name} must be one of {q.values}, got {answers.get(q.name)!r}")
    extra = sorted(n for n, v in answers.items() if v is not None and n not in names)
    if extra:
        raise ValueError(f"this set does not ask {', '.join(extra)}")
    return {q.name: (answers.get(q.name) if q.name in names else None) for q in QUESTIONS}


def _validate(answers: Answers, asked: Sequence[q_registry.Question] | None, skip_reason: str | None,
              comment: str | None, time_spent_ms: int, shown_position: int) -> dict[str, str | None]:
    """Raise ValueError naming the bad field; runs before any DB access. The full answer dict."""
    if skip_reason is None:
        full = check_answers(answers, asked if asked is not None else asked_by(answers))
    else:
        if any(v is not None for v in answers.values()):
            raise ValueError("a skip carries no answer (no identity/edit or other label)")
        full = {q.name: None for q in QUESTIONS}
        if not isinstance(skip_reason, str) or not skip_reason.strip():
            raise ValueError("a skip needs a non-empty reason")
        if len(skip_reason) > MAX_COMMENT_CHARS:
            raise ValueError(f"skip reason is longer than {MAX_COMMENT_CHARS} characters")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS):
        raise ValueError(f"comment must be text of at most {MAX_COMMENT_CHARS} characters")
    for field, text in (("skip reason", skip_reason), ("comment", comment)):
        problem = text_problem(field, text) if isinstance(text, str) else None
        if problem:
            raise ValueError(problem)
    _check_int("time_spent_ms", time_spent_ms, 0)
    _check_int("shown_position", shown_position)
    return full


def answers_of(row: object) -> dict[str, str | None]:
    """A judgment's (or an audit's, or a decision's) answers, question -> value."""
    return {q.name: getattr(row, q.name) for q in QUESTIONS}


def upsert_judgment(
    session: Session,
    annotator_id: int,
    task_id: int,
    identity: str | None = None,
    edit: str | None = None,
    comment: str | None = None,
    time_spent_ms: int = 0,
    shown_position: int = 0,
    skip_reason: str | None = None,
    expected: object = UNCHECKED,
    answers: Answers | None = None,
    asked: Sequence[q_registry.Question] | None = None,
) -> Judgment:
    """Insert this annotator's judgment of the task, or update it after auditing the old values.

    An answer gives every question of `asked` (the set's questions) in `answers` (`identity` and
    `edit` are shorthands for those two); without `asked`, the core questions of the mode it
    answers. A skip gives `skip_reason` and no answer.
    `expected`: the `revision_of` the judgment the annotator's screen showed; if it changed since
    (a save from another tab) and this write would change it again, `StaleAnswer` and nothing is
    written — two tabs used to overwrite each other silently and add up their time.
    Flushes but does not commit: the caller owns the transaction.
    """
    full = _validate(merge_answers(identity, edit, answers), asked, skip_reason, comment, time_spent_ms,
                     shown_position)
    status = "answered" if skip_reason is None else "skipped"
    reason = skip_reason.strip() if skip_reason is not None else None
    comment = comment.strip() or None if comment is not None else None
    existing = session.scalars(
        select(Judgment).where(Judgment.annotator_id == annotator_id, Judgment.task_id == task_id)
    ).one_or_none()
    if existing is None and expected is not UNCHECKED and expected is not None:
        raise StaleAnswer("this screen showed an answer that is no longer there: press N to reload")
    if existing is None:
        judgment = Judgment(annotator_id=annotator_id, task_id=task_id, status=status, **full,
                            skip_reason=reason, comment=comment, time_spent_ms=time_spent_ms,
                            shown_position=shown_position)
        session.add(judgment)
        session.flush()
        return judgment
    if (existing.status, answers_of(existing), existing.skip_reason, existing.comment) == (
            status, full, reason, comment):
        # The same write again (a client retry after a lost reply): a no-op, so a retry neither
        # adds an audit row nor counts its time twice.
        return existing
    if expected is not UNCHECKED and revision_of(existing) != expected:
        raise StaleAnswer("this pair was answered in another tab or window after this screen showed "
                          "it; nothing was changed: press N to go on, or B to see the saved answer")
    # Old values go to the audit table first, so a change never erases what was said before.
    session.add(JudgmentAudit(judgment_id=existing.id, status=existing.status, **answers_of(existing),
                              skip_reason=existing.skip_reason, comment=existing.comment))
    existing.status = status
    for name, value in full.items():
        setattr(existing, name, value)
    existing.skip_reason, existing.comment = reason, comment
    # Time accumulates: a revisit is more time spent on the same task.
    existing.time_spent_ms = existing.time_spent_ms + time_spent_ms
    existing.shown_position = shown_position
    existing.updated_at = utcnow()
    session.flush()
    return existing


def judgments_for(session: Session, annotator_id: int) -> list[Judgment]:
    """Only this annotator's judgments, oldest first (annotators never see each other's)."""
    return list(
        session.scalars(
            select(Judgment).where(Judgment.annotator_id == annotator_id).order_by(Judgment.id)
        )
    )
