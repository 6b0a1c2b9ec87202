"""Writing and reading judgments: validated upsert (an answer or a skip) with an audit trail,
per-annotator reads."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import EDIT_VALUES, IDENTITY_VALUES, Judgment, JudgmentAudit, utcnow

MAX_COMMENT_CHARS = 2000


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
) -> Judgment:
    """Insert this annotator's judgment of the task, or update it after auditing the old values.

    An answer gives `identity` and `edit`; a skip gives `skip_reason` and None for both.
    Flushes but does not commit: the caller owns the transaction.
    """
    _validate(identity, edit, skip_reason, comment, time_spent_ms, shown_position)
    status = "answered" if skip_reason is None else "skipped"
    reason = skip_reason.strip() if skip_reason is not None else None
    comment = comment.strip() or None if comment is not None else None
    existing = session.scalars(
        select(Judgment).where(Judgment.annotator_id == annotator_id, Judgment.task_id == task_id)
    ).one_or_none()
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
