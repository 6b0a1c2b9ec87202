"""The load benchmark's verdict on the database (bench/load_annotation.py): every acknowledged
write against the rows, the audit trail, the read-backs and the resumes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# -- checking the database ------------------------------------------------------------------------

@dataclass
class Check:
    acked: int = 0
    acked_keys: int = 0
    rows: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    misattributed: list[str] = field(default_factory=list)
    committed_unacked: int = 0     # rows holding a write whose reply was lost to the kill
    read_back_wrong: list[str] = field(default_factory=list)
    resumes: int = 0
    resumes_wrong: list[str] = field(default_factory=list)
    integrity: str = "n/a"
    fk_violations: int | None = None
    audits: int = 0


def check_db(db: str, recs: list[dict]) -> Check:
    from sqlalchemy import text

    from db.sqlite import open_db

    c = Check()
    engine = open_db(db)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                c.integrity = "; ".join(r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check"))
                c.fk_violations = len(conn.exec_driver_sql("PRAGMA foreign_key_check").all())
            rows = conn.execute(text(
                "SELECT an.name, j.task_id, a.position, j.status, j.identity, j.edit, j.skip_reason, "
                "j.comment FROM judgments j JOIN annotators an ON an.id = j.annotator_id "
                "LEFT JOIN assignments a ON a.annotator_id = j.annotator_id AND a.task_id = j.task_id")).all()
            c.audits = conn.execute(text("SELECT count(*) FROM judgment_audits")).scalar()
    finally:
        engine.dispose()
    c.rows = len(rows)
    stored: dict[tuple[str, int], list[Any]] = {}
    seen_pairs: dict[tuple[str, int], int] = {}
    for r in rows:
        seen_pairs[(r[0], r[1])] = seen_pairs.get((r[0], r[1]), 0) + 1
        if r[2] is None:
            c.misattributed.append(f"{r[0]} task {r[1]}: a judgment on a task outside their queue")
            continue
        stored.setdefault((r[0], r[2]), []).append(r)
    c.duplicated = [f"{k}: {n} rows" for k, n in seen_pairs.items() if n > 1]
    values = lambda p: (p["status"], p["identity"], p["edit"], p["skip_reason"], p["comment"])  # noqa: E731
    written: set[tuple[str, int]] = set()
    for rec in recs:
        name = rec["name"]
        acks: dict[int, list[dict]] = {}
        for a in rec["acks"]:
            acks.setdefault(a["position"], []).append(a)
        maybe: dict[int, list[dict]] = {}
        for u in rec["unacked"]:
            if u.get("sent"):
                maybe.setdefault(u["position"], []).append(u)
        c.acked += len(rec["acks"])
        c.acked_keys += len(acks)
        for pos in set(acks) | set(maybe):
            written.add((name, pos))
            row = stored.get((name, pos))
            last = acks[pos][-1] if pos in acks else None
            if row is None:
                if last is not None:
                    c.lost.append(f"{name} pair #{pos}")
                continue
            got = tuple(row[0][3:8])
            later = [u for u in maybe.get(pos, []) if last is None or u["t"] > last["t"]]
            if last is not None and got == values(last):
                continue
            if any(got == values(u) for u in later):
                c.committed_unacked += 1
                continue
            if last is not None:
                c.stale.append(f"{name} pair #{pos}: stored {got}, last acknowledged {values(last)}")
        for rb in rec["read_back"]:  # what Back showed against the last answer acked before it
            if rb["saved"] is not None and rb["shown"] != rb["saved"]:
                c.read_back_wrong.append(f"{name} pair #{rb['position']}: Back showed {rb['shown']!r}, "
                                         f"saved {rb['saved']!r}")
        c.resumes += len(rec["resumes"])
        c.resumes_wrong += [f"{name}: {r}" for r in rec["resumes"] if not r["ok"]]
    c.misattributed += [f"{k[0]} pair #{k[1]}: a row no client wrote" for k in stored if k not in written]
    return c
