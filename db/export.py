"""Export judgments, one row per judgment, to CSV or JSONL; read them back identically. Or a
set's final labels as TREC qrels (db/labels.py: graded from identity x edit, or the relevance
answer; `--pool-depth D` lists pooled items at rank <= D that have no label as -1).

    python -m db.export --db ann.sqlite --format csv --out judgments.csv
        [--pseudonymise --salt SECRET] [--annotator NAME]
    python -m db.export --db ann.sqlite --format qrels --set NAME --out qrels.txt [--pool-depth 5]

Pseudonym = first 12 hex digits of HMAC-SHA256(salt, name): stable for one salt, and not
reversible without it. Whoever holds the salt can test candidate names, so keep it secret and
out of the export's folder.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import hmac
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cir_core import env
from cir_core.errors import CIRError, InputError
from cir_core.fileio import atomic_write, csv_cell, csv_uncell, loads_json
from db.blind import opaque_id
from db.judgments import answers_of
from db.models import GOLD_QUESTIONS, QUESTIONS, Annotator, Judgment, Query, QuerySet, Task
from db.results import short_read

ANSWER_FIELDS: tuple[str, ...] = tuple(q.name for q in QUESTIONS)  # every declared question, in order
GOLD_FIELDS: tuple[str, ...] = tuple(f"gold_{q.name}" for q in GOLD_QUESTIONS)
FIELDS: tuple[str, ...] = (
    "query_set", "query_external_id", "item_id", "item_b_id", "task_id", "annotator", "status",
    *ANSWER_FIELDS, "skip_reason", "comment", "time_spent_ms", "shown_position", "created_at",
    "updated_at", *GOLD_FIELDS,
)
# What an annotator's own export holds (the Results tab): what they answered, with the pair and
# its query named by opaque ids (db.blind.opaque_id, keyed by the set's secret), in the order they
# were shown — nothing about pooling, gold or the gallery: no task, item or query ids (on the
# generated world the item ids are laid out per query, so they gave the target away), no gold.
OWN_FIELDS: tuple[str, ...] = (
    "query_set", "query", "pair", "annotator", "status", *ANSWER_FIELDS, "skip_reason", "comment",
    "time_spent_ms", "shown_position", "created_at", "updated_at",
)
INT_FIELDS = frozenset({"task_id", "time_spent_ms", "shown_position"})
SALT_ENV = "CIR_PSEUDONYM_SALT"


def pseudonym(name: str, salt: str) -> str:
    """First 12 hex digits of HMAC-SHA256 keyed by `salt` over the annotator's name."""
    if not isinstance(salt, str) or not salt:
        raise InputError("pseudonymising needs a non-empty secret salt")
    return hmac.new(salt.encode("utf-8"), name.encode("utf-8"), hashlib.sha256).hexdigest()[:12]


def iso_utc(value: datetime | None) -> str | None:
    """ISO-8601 in UTC. SQLite drops the offset on the way back, and we only ever write UTC."""
    if value is None:
        return None
    value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
    return value.astimezone(timezone.utc).isoformat(timespec="microseconds")


def export_rows(session: Session, annotator: str | None = None,
                pseudonymise_salt: str | None = None) -> list[dict[str, Any]]:
    """One dict per judgment (keys: FIELDS), ordered by set, query, item, task, judgment.

    `annotator` keeps only that person's rows (InputError if unknown). Empty strings are stored
    as None so CSV (where empty means null) round-trips exactly.
    """
    if pseudonymise_salt is not None:
        pseudonym("", pseudonymise_salt)  # validate the salt before reading anything
    stmt = (select(QuerySet.name, Query.external_id, Task.item_id, Task.id, Annotator.name,
                   Judgment, Task)
            .join(Task, Judgment.task_id == Task.id).join(Query, Task.query_id == Query.id)
            .join(QuerySet, Query.query_set_id == QuerySet.id)
            .join(Annotator, Judgment.annotator_id == Annotator.id)
            .order_by(QuerySet.name, Query.external_id, Task.item_id, Task.id, Judgment.id))
    with short_read(session):
        return _export_rows(session, stmt, annotator, pseudonymise_salt)


def own_rows(session: Session, annotator: str) -> list[dict[str, Any]]:
    """`annotator`'s own judgments with OWN_FIELDS only (what the Results tab offers them), in
    each set in the order the pairs were shown to them."""
    stmt = (select(QuerySet.name, QuerySet.secret, Query.id, Task.id, Annotator.name, Judgment)
            .join(Task, Judgment.task_id == Task.id).join(Query, Task.query_id == Query.id)
            .join(QuerySet, Query.query_set_id == QuerySet.id)
            .join(Annotator, Judgment.annotator_id == Annotator.id)
            .where(Annotator.name == annotator))
    with short_read(session):
        if session.scalars(select(Annotator.id).where(Annotator.name == annotator)).first() is None:
            raise InputError(f"no annotator named {annotator!r}")
        found = session.execute(stmt).all()
    rows = []
    for qs_name, secret, query_id, task_id, name, j in found:
        row = {"query_set": qs_name, "query": opaque_id(secret, "query", query_id),
               "pair": opaque_id(secret, "pair", task_id), "annotator": name, "status": j.status,
               **answers_of(j), "skip_reason": j.skip_reason, "comment": j.comment,
               "time_spent_ms": j.time_spent_ms, "shown_position": j.shown_position,
               "created_at": iso_utc(j.created_at), "updated_at": iso_utc(j.updated_at)}
        rows.append({k: (None if v == "" else v) for k, v in row.items()})
    rows.sort(key=lambda r: (r["query_set"], r["shown_position"], r["pair"]))
    return rows


def _export_rows(session: Session, stmt: Any, annotator: str | None,
                 salt: str | None) -> list[dict[str, Any]]:
    if annotator is not None:
        if session.scalars(select(Annotator.id).where(Annotator.name == annotator)).first() is None:
            raise InputError(f"no annotator named {annotator!r}")
        stmt = stmt.where(Annotator.name == annotator)
    rows = []
    for qs_name, ext_id, item_id, task_id, name, j, task in session.execute(stmt):
        row = {
            "query_set": qs_name, "query_external_id": ext_id, "item_id": item_id,
            "item_b_id": task.item_b_id or None, "task_id": task_id,
            "annotator": name if salt is None else pseudonym(name, salt),
            "status": j.status, **answers_of(j),
            "skip_reason": j.skip_reason, "comment": j.comment,
            "time_spent_ms": j.time_spent_ms, "shown_position": j.shown_position,
            "created_at": iso_utc(j.created_at), "updated_at": iso_utc(j.updated_at),
            **{f: getattr(task, f) for f in GOLD_FIELDS},
        }
        rows.append({k: (None if v == "" else v) for k, v in row.items()})
    return rows


def qrels_rows(session: Session, set_name: str, pool_depth: int | None = None
               ) -> tuple[list[tuple[str, str, int]], dict[str, int]]:
    """A pointwise set's final labels as `(query id, item id, grade)` rows (db/labels.py), sorted,
    and counts: graded, tied questions resolved low, `-1` pooled-unjudged rows (`pool_depth`:
    every item some method ranked <= it without a label), left out (unjudged beyond the depth)."""
    from db.labels import MAX_GRADE, final_labels, grade
    from db.results import load_set

    data = load_set(session, set_name)
    if data.mode != "pointwise":
        raise InputError(f"set {set_name!r} is {data.mode}: qrels grade a candidate beside its query "
                         "(a pointwise set)")
    if pool_depth is not None and not 1 <= pool_depth <= data.pool_k:
        raise InputError(f"--pool-depth must be in 1..{data.pool_k} (the set's pool depth), got {pool_depth}")
    ext = dict(session.execute(select(Query.id, Query.external_id).where(Query.id.in_(data.query_ids))).all())
    pooled = {(q, it) for ranks in data.rankings.values() for q, by_r in ranks.items()
              for r, it in by_r.items() if pool_depth is not None and r <= pool_depth}
    relevance = any(q.name == "relevance" for q in data.questions)
    finals = final_labels(data)
    rows, counts = [], {"graded": 0, "resolved_low": 0, "unjudged": 0, "left_out": 0, "max_grade": MAX_GRADE}
    for (qid, item), task in data.task_of.items():
        g = grade(finals[task], relevance)
        if g is None:
            if (qid, item) in pooled:
                rows.append((ext[qid], item, -1))
                counts["unjudged"] += 1
            else:
                counts["left_out"] += 1
            continue
        counts["graded"] += 1
        counts["resolved_low"] += bool(finals[task].source == "tie")
        rows.append((ext[qid], item, g))
    return sorted(rows), counts


def write_csv(rows: list[dict[str, Any]], path: str | Path, fields: tuple[str, ...] = FIELDS) -> None:
    """CSV with a header (`fields`: FIELDS or OWN_FIELDS); the csv module quotes commas, quotes
    and newlines; None -> empty; formula-like text escaped (`cir_core.fileio.csv_cell`); written whole or not at all."""
    def write(f: Any) -> None:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\r\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_cell(r[k]) for k in fields})
    atomic_write(Path(path), write, binary=False, newline="")


def write_jsonl(rows: list[dict[str, Any]], path: str | Path, fields: tuple[str, ...] = FIELDS) -> None:
    """One JSON object per line (UTF-8, non-ASCII kept readable), keys `fields`."""
    def write(f: Any) -> None:
        for r in rows:
            f.write(json.dumps({k: r[k] for k in fields}, ensure_ascii=False) + "\n")
    atomic_write(Path(path), write, binary=False, newline="")


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows written by write_csv (the full or the annotator's own export), with ints, None and
    the escaped text restored."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) not in (FIELDS, OWN_FIELDS):  # this registry's questions
            raise InputError(f"{path}: not a judgments export (header {reader.fieldnames})")
        return [{k: (None if v == "" else int(v) if k in INT_FIELDS else csv_uncell(v))
                 for k, v in r.items()} for r in reader]


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows written by write_jsonl."""
    with open(path, encoding="utf-8") as f:
        return [loads_json(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m db.export", description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, help="the annotation DB: a SQLite file or a SQLAlchemy URL")
    p.add_argument("--format", required=True, choices=("csv", "jsonl", "qrels"),
                   help="csv / jsonl: one row per judgment; qrels: a set's final labels, graded (docs/ANNOTATION.md)")
    p.add_argument("--set", dest="query_set", help="qrels: the (pointwise) query set")
    p.add_argument("--pool-depth", type=int, help="qrels: list pooled items at rank <= D without a label as -1")
    p.add_argument("--out", required=True, type=Path, help="file to write (replaced if present)")
    p.add_argument("--pseudonymise", action="store_true",
                   help="replace annotator names by HMAC pseudonyms")
    p.add_argument("--salt", help=f"the secret for --pseudonymise (or ${SALT_ENV})")
    p.add_argument("--annotator", help="only this annotator's judgments")
    args = p.parse_args(argv)
    if "://" not in args.db and not Path(args.db).is_file():
        p.error(f"no such database file: {args.db}")
    salt = None
    if args.pseudonymise:
        salt = args.salt or env.read(SALT_ENV)
        if not salt:
            p.error(f"--pseudonymise needs --salt SECRET (or ${SALT_ENV})")
    elif args.salt:
        p.error("--salt without --pseudonymise would export real names; add --pseudonymise")
    if args.format == "qrels" and (args.pseudonymise or args.annotator):
        p.error("qrels hold final labels, not who gave them: --pseudonymise and --annotator do not apply")
    if args.format != "qrels" and (args.query_set or args.pool_depth is not None):
        p.error("--set and --pool-depth are for --format qrels")
    from db.sqlite import open_db, session_factory

    engine = open_db(args.db)
    try:
        with session_factory(engine)() as session:
            if args.format == "qrels":
                from cir_core.eval.qrels import write_qrels
                from db.results import query_set_names

                names = query_set_names(session)
                name = args.query_set or (names[0] if len(names) == 1 else None)
                if name is None:
                    raise InputError(f"--set is needed: the database holds {len(names)} sets ({', '.join(names)})")
                qrows, counts = qrels_rows(session, name, args.pool_depth)
                n = write_qrels(qrows, args.out)
                print(f"{n} qrels lines -> {args.out} ({counts['graded']} graded 0-{counts['max_grade']}, "
                      f"{counts['resolved_low']} with a tie resolved to the lower grade, {counts['unjudged']} pooled "
                      f"and unjudged as -1, {counts['left_out']} unjudged left out)")
                return 0
            rows = export_rows(session, args.annotator, salt)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    (write_csv if args.format == "csv" else write_jsonl)(rows, args.out)
    print(f"{len(rows)} judgments -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
