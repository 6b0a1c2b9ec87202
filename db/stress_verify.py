"""Check a stressed annotation DB against every write the clients saw acknowledged."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from db.sqlite import open_db

_COLS = ("status", "identity", "edit", "skip_reason", "comment", "shown_position")


@dataclass
class Verification:
    acked_writes: int = 0
    acked_keys: int = 0             # distinct (annotator, task) among the acked writes
    rows: int = 0
    lost: list[tuple[int, int]] = field(default_factory=list)       # acked, no row
    duplicated: list[tuple[int, int]] = field(default_factory=list)  # > 1 row per key
    stale: list[str] = field(default_factory=list)   # row differs from the last acked value
    unacked_rows: int = 0           # rows for keys never acknowledged (a write given up)
    audits: int = 0
    reapplied: int = 0              # audits beyond the acked revisions: retries of committed writes
    time_inflated_rows: int = 0     # time_spent_ms above the acked sum (re-applied retries)
    time_inflated_ms: int = 0
    unique_constraint: str = ""
    integrity: list[str] = field(default_factory=list)
    fk_violations: int = 0

    @property
    def ok(self) -> bool:
        return (not self.lost and not self.duplicated and not self.stale
                and self.integrity in (["ok"], ["n/a"]) and self.unique_constraint == "held"
                and self.fk_violations == 0 and self.reapplied >= 0)


def _expected(payload: dict[str, Any]) -> tuple:
    skipped = payload.get("skip_reason") is not None
    return ("skipped" if skipped else "answered", payload.get("identity"), payload.get("edit"),
            payload.get("skip_reason"), payload.get("comment"), payload.get("shown_position", 0))


# Every foreign key of the schema, as (table, column, parent table): orphans counted by a join,
# the same check on any backend (SQLite's PRAGMA foreign_key_check does it for SQLite too).
_FKS = (("judgments", "annotator_id", "annotators"), ("judgments", "task_id", "tasks"),
        ("judgment_audits", "judgment_id", "judgments"), ("assignments", "annotator_id", "annotators"),
        ("assignments", "task_id", "tasks"), ("assignments", "query_set_id", "query_sets"),
        ("tasks", "query_id", "queries"), ("queries", "query_set_id", "query_sets"),
        ("retrieved_items", "query_id", "queries"))


def _orphans(conn: Any) -> int:
    return sum(conn.execute(text(f"SELECT count(*) FROM {t} c LEFT JOIN {p} ON {p}.id = c.{col} "
                                 f"WHERE {p}.id IS NULL")).scalar() for t, col, p in _FKS)


def _unique_constraint(conn: Any) -> str:
    """'held' if the schema has uq_judgment_annotator_task and it refuses a copy of a row."""
    if conn.dialect.name == "sqlite":
        sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'judgments'")).scalar()
    else:
        sql = " ".join(conn.execute(text("SELECT conname FROM pg_constraint WHERE conrelid = "
                                         "'judgments'::regclass")).scalars())
    if not sql or "uq_judgment_annotator_task" not in sql:
        return "MISSING from the schema"
    try:
        conn.execute(text(
            "INSERT INTO judgments (annotator_id, task_id, status, identity, edit, skip_reason, "
            "time_spent_ms, shown_position, created_at, updated_at) SELECT annotator_id, task_id, "
            "status, identity, edit, skip_reason, 0, 0, created_at, updated_at FROM judgments "
            "LIMIT 1"))
        return "NOT ENFORCED: a duplicate row was accepted"
    except IntegrityError:
        return "held"
    finally:
        conn.rollback()


def verify(db: Path | str, acks: Iterable[Any]) -> Verification:
    """Compare the database at `db` (a SQLite file or a URL) with `acks` (objects with
    annotator_id, task_id, payload), in the order each client received them. On PostgreSQL
    there is no integrity_check (integrity is "n/a"); foreign keys are checked by joins."""
    v = Verification()
    by_key: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for a in acks:
        by_key.setdefault((a.annotator_id, a.task_id), []).append(a.payload)
        v.acked_writes += 1
    v.acked_keys = len(by_key)
    engine = open_db(db)
    try:
        with engine.connect() as c:
            if c.dialect.name == "sqlite":
                v.integrity = [r[0] for r in c.exec_driver_sql("PRAGMA integrity_check")]
                v.fk_violations = len(c.exec_driver_sql("PRAGMA foreign_key_check").all())
            else:
                v.integrity = ["n/a"]
                v.fk_violations = _orphans(c)
            rows = c.execute(text(
                f"SELECT annotator_id, task_id, time_spent_ms, {', '.join(_COLS)} FROM judgments"
            )).all()
            v.audits = c.execute(text("SELECT count(*) FROM judgment_audits")).scalar()
            c.rollback()
            v.unique_constraint = _unique_constraint(c)
    finally:
        engine.dispose()
    v.rows = len(rows)
    stored: dict[tuple[int, int], list[Any]] = {}
    for r in rows:
        stored.setdefault((r[0], r[1]), []).append(r)
    v.duplicated = sorted(k for k, rs in stored.items() if len(rs) > 1)
    v.unacked_rows = sum(1 for k in stored if k not in by_key)
    for key, payloads in by_key.items():
        if key not in stored:
            v.lost.append(key)
            continue
        row = stored[key][-1]
        if tuple(row[3:]) != _expected(payloads[-1]):
            v.stale.append(f"{key}: stored {tuple(row[3:])}, last acked {_expected(payloads[-1])}")
        # time_spent_ms accumulates per write, so below the acked sum means an acked update
        # was lost; above it means a retry re-applied a write that had already committed.
        extra = row[2] - sum(p["time_spent_ms"] for p in payloads)
        if extra < 0:
            v.stale.append(f"{key}: time_spent_ms {row[2]} below the acked sum: an update was lost")
        elif extra > 0:
            v.time_inflated_rows += 1
            v.time_inflated_ms += extra
    v.lost.sort()
    v.reapplied = v.audits - (v.acked_writes - v.acked_keys)
    return v
