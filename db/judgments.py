"""Writing and reading judgments: validated upsert with audit trail, per-annotator reads."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import EDIT_VALUES, IDENTITY_VALUES, Judgment, JudgmentAudit, utcnow


def _validate(identity: str, edit: str, time_spent_ms: int, shown_position: int) -> None:
    """Raise ValueError naming the bad field; runs before any DB access."""
    if identity not in IDENTITY_VALUES:
        raise ValueError(f"identity must be one of {IDENTITY_VALUES}, got {identity!r}")
    if edit not in EDIT_VALUES:
        raise ValueError(f"edit must be one of {EDIT_VALUES}, got {edit!r}")
    # bool is an int subclass; reject it so a UI bug can't store True as 1 ms.
    if not isinstance(time_spent_ms, int) or isinstance(time_spent_ms, bool) or time_spent_ms < 0:
        raise ValueError(f"time_spent_ms must be a non-negative int, got {time_spent_ms!r}")
    if not isinstance(shown_position, int) or isinstance(shown_position, bool):
        raise ValueError(f"shown_position must be an int, got {shown_position!r}")


def upsert_judgment(
    session: Session,
    annotator_id: int,
    task_id: int,
    identity: str,
    edit: str,
    comment: str | None = None,
    time_spent_ms: int = 0,
    shown_position: int = 0,
) -> Judgment:
    """Insert this annotator's judgment of the task, or update it after auditing the old values.

    Flushes but does not commit: the caller owns the transaction.
    """
    _validate(identity, edit, time_spent_ms, shown_position)
    existing = session.scalars(
        select(Judgment).where(Judgment.annotator_id == annotator_id, Judgment.task_id == task_id)
    ).one_or_none()
    if existing is None:
        judgment = Judgment(
            annotator_id=annotator_id,
            task_id=task_id,
            identity=identity,
            edit=edit,
            comment=comment,
            time_spent_ms=time_spent_ms,
            shown_position=shown_position,
        )
        session.add(judgment)
        session.flush()
        return judgment
    # Old values go to the audit table first, so a change never erases what was said before.
    session.add(
        JudgmentAudit(
            judgment_id=existing.id,
            identity=existing.identity,
            edit=existing.edit,
            comment=existing.comment,
        )
    )
    existing.identity = identity
    existing.edit = edit
    existing.comment = comment
    existing.time_spent_ms = time_spent_ms
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
