"""Writing and reading judgments: validated upsert (an answer or a skip) with an audit trail,
per-annotator reads."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import EDIT_VALUES, IDENTITY_VALUES, Judgment, JudgmentAudit, utcnow

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


def _validate(identity: str | None, edit: str | None, skip_reason: str | None, comment: str | None,
              time_spent_ms: int, shown_position: int) -> None:
    """Raise ValueError naming the bad field; runs before any DB access."""
    if skip_reason is None:
        if identity not in IDENTITY_VALUES:
            raise ValueError(f"identity must be one of {IDENTITY_VALUES}, got {identity!r}")
        if edit not in EDIT_VALUES:
            raise ValueError(f"edit must be one of {EDIT_VALUES}, got {edit!r}")
    else:
        if identity is not None or edit is not None:
            raise ValueError("a skip carries no identity/edit answer")
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


def upsert_judgment(
    session: Session,
    annotator_id: int,
    task_id: int,
    identity: str | None,
    edit: str | None,
    comment: str | None = None,
    time_spent_ms: int = 0,
    shown_position: int = 0,
    skip_reason: str | None = None,
    expected: object = UNCHECKED,
) -> Judgment:
    """Insert this annotator's judgment of the task, or update it after auditing the old values.

    An answer gives `identity` and `edit`; a skip gives `skip_reason` and None for both.
    `expected`: the `revision_of` the judgment the annotator's screen showed; if it changed since
    (a save from another tab) and this write would change it again, `StaleAnswer` and nothing is
    written — two tabs used to overwrite each other silently and add up their time.
    Flushes but does not commit: the caller owns the transaction.
    """
    _validate(identity, edit, skip_reason, comment, time_spent_ms, shown_position)
    status = "answered" if skip_reason is None else "skipped"
    reason = skip_reason.strip() if skip_reason is not None else None
    comment = comment.strip() or None if comment is not None else None
    existing = session.scalars(
        select(Judgment).where(Judgment.annotator_id == annotator_id, Judgment.task_id == task_id)
    ).one_or_none()
    if existing is None and expected is not UNCHECKED and expected is not None:
        raise StaleAnswer("this screen showed an answer that is no longer there: press N to reload")
    if existing is None:
        judgment = Judgment(annotator_id=annotator_id, task_id=task_id, status=status,
                            identity=identity, edit=edit, skip_reason=reason, comment=comment,
                            time_spent_ms=time_spent_ms, shown_position=shown_position)
        session.add(judgment)
        session.flush()
        return judgment
    if (existing.status, existing.identity, existing.edit, existing.skip_reason, existing.comment) == (
            status, identity, edit, reason, comment):
        # The same write again (a client retry after a lost reply): a no-op, so a retry neither
        # adds an audit row nor counts its time twice.
        return existing
    if expected is not UNCHECKED and revision_of(existing) != expected:
        raise StaleAnswer("this pair was answered in another tab or window after this screen showed "
                          "it; nothing was changed: press N to go on, or B to see the saved answer")
    # Old values go to the audit table first, so a change never erases what was said before.
    session.add(JudgmentAudit(judgment_id=existing.id, status=existing.status,
                              identity=existing.identity, edit=existing.edit,
                              skip_reason=existing.skip_reason, comment=existing.comment))
    existing.status, existing.identity, existing.edit = status, identity, edit
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
