"""Schema migrations for the annotation DB (Alembic, batch mode), usable without an ini file.

    python -m db.migrate [--db FILE] upgrade [--revision REV]
    python -m db.migrate [--db FILE] current
    python -m db.migrate [--db FILE] history

A DB written by the old `create_all` (tables, no alembic_version) is stamped at head if its
schema matches the models exactly, and refused otherwise.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import ResolutionError
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, Table, inspect
from sqlalchemy.engine import Inspector
from sqlalchemy.exc import DatabaseError

from cir_core import env
from cir_core.errors import CIRError
from db.models import Base
from db.sqlite import describe, is_url, open_db

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"


AlembicError = (CommandError, ResolutionError)


class SchemaError(CIRError):
    """The DB file's schema is not one this code can use or migrate."""


def alembic_config() -> Config:
    """Config pointing at db/migrations, with no ini file (and so no logging setup)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


@contextmanager
def _engine(engine_or_path: Engine | str | Path) -> Iterator[Engine]:
    if isinstance(engine_or_path, Engine):
        yield engine_or_path
        return
    engine = open_db(engine_or_path)
    try:
        yield engine
    finally:
        engine.dispose()


def _norm_sql(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def _model_shape(table: Table) -> dict[str, set]:
    """The constraints compare_metadata skips (CHECKs) or matches loosely, as the models say."""
    checks, uniques, fks = set(), set(), set()
    for c in table.constraints:
        kind = type(c).__name__
        if kind == "CheckConstraint":
            checks.add((c.name, _norm_sql(str(c.sqltext))))
        elif kind == "UniqueConstraint":
            uniques.add((c.name, tuple(col.name for col in c.columns)))
        elif kind == "ForeignKeyConstraint":
            fks.add((tuple(c.column_keys), c.referred_table.name,
                     tuple(e.column.name for e in c.elements), (c.ondelete or "").upper()))
    indexes = {(i.name, tuple(col.name for col in i.columns), bool(i.unique)) for i in table.indexes}
    return {"check": checks, "unique": uniques, "fk": fks, "index": indexes}


def _db_shape(insp: Inspector, name: str) -> dict[str, set]:
    """The same constraints, as the SQLite file has them."""
    return {
        "check": {(c["name"], _norm_sql(c["sqltext"])) for c in insp.get_check_constraints(name)},
        "unique": {(u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(name)},
        "fk": {(tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]),
                (f.get("options", {}).get("ondelete") or "").upper())
               for f in insp.get_foreign_keys(name)},
        "index": {(i["name"], tuple(i["column_names"]), bool(i["unique"]))
                  for i in insp.get_indexes(name)},
    }


def schema_diffs(conn: Connection) -> list[str]:
    """Every difference between the DB and db/models.py; empty means they match.

    Alembic's compare_metadata (tables, columns, types, nullability, server defaults, indexes,
    FKs) plus a by-name comparison of CHECK, UNIQUE, FK and index definitions, which
    compare_metadata does not see on SQLite (CHECKs) or matches by columns only (UNIQUEs)."""
    mc = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
    diffs = [repr(d) for d in compare_metadata(mc, Base.metadata)]
    insp = inspect(conn)
    for table in Base.metadata.sorted_tables:
        if not insp.has_table(table.name):
            continue  # compare_metadata already reported the missing table
        model, db = _model_shape(table), _db_shape(insp, table.name)
        for kind in model:
            for item in sorted(model[kind] - db[kind], key=repr):
                diffs.append(f"{table.name}: {kind} {item} in the models, not in the DB")
            for item in sorted(db[kind] - model[kind], key=repr):
                diffs.append(f"{table.name}: {kind} {item} in the DB, not in the models")
    return diffs


def _stamp_if_legacy(engine: Engine, cfg: Config) -> None:
    """A create_all DB (tables, no alembic_version): stamp head if it matches, else refuse."""
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        if not tables or VERSION_TABLE in tables:
            return
        diffs = schema_diffs(conn)
    if diffs:
        shown = "\n  ".join(diffs[:20])
        raise SchemaError(
            f"{engine.url.database}: tables exist but no {VERSION_TABLE}, and the schema differs "
            f"from db/models.py, so it cannot be stamped as migrated. Differences:\n  {shown}\n"
            "Export the data and load it into a new DB, or write a migration for this layout.")
    _run(engine, cfg, lambda c: command.stamp(c, "head"))


def _run(engine: Engine, cfg: Config, fn: Callable[[Config], None]) -> None:
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        try:
            fn(cfg)
        finally:
            cfg.attributes.pop("connection", None)


def upgrade(engine_or_path: Engine | str | Path, revision: str = "head") -> None:
    """Bring the DB to `revision` in one transaction; creates the file and tables if new.
    `SchemaError` for a file that is not an annotation DB, and for a revision this code does not
    know (asked for, or the DB's own: written by a newer version of the workbench)."""
    cfg = alembic_config()
    where = describe(engine_or_path) if not isinstance(engine_or_path, Engine) else \
        engine_or_path.url.render_as_string(hide_password=True)
    try:
        with _engine(engine_or_path) as engine, removed_if_left_empty(engine):
            _stamp_if_legacy(engine, cfg)
            _run(engine, cfg, lambda c: command.upgrade(c, revision))
    except DatabaseError as exc:
        raise SchemaError(f"{where}: not a usable annotation database ({exc.orig})") from exc
    except AlembicError as exc:
        raise SchemaError(f"{where}: cannot migrate to {revision!r}: {exc}. Known revisions: "
                          f"{', '.join(_known())} (python -m db.migrate history); a database written by a "
                          "newer workbench needs that version.") from exc


@contextmanager
def removed_if_left_empty(engine: Engine) -> Iterator[None]:
    """A SQLite file that did not exist before and is still empty when the block fails is
    removed: opening it created it, and an empty file is refused later (`EmptyDatabaseFile`)."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    new = bool(path) and path != ":memory:" and not os.path.exists(path)
    try:
        yield
    except BaseException:
        if new and os.path.isfile(path) and os.path.getsize(path) == 0:
            engine.dispose()
            os.unlink(path)
        raise


def _known() -> list[str]:
    return [s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()][::-1]


def init_db(engine: Engine) -> None:
    """Create a new DB, or migrate an existing one, to the newest Alembic revision, then (SQLite)
    switch the file to WAL.

    Idempotent. A DB made by the old `create_all` (no alembic_version) is stamped if it matches
    the models, else refused with `SchemaError` listing the differences — and left exactly as it
    was: WAL is switched on only after the check, since the journal mode is stored in the file."""
    upgrade(engine, "head")
    if engine.dialect.name == "sqlite":
        enable_wal(engine)


def enable_wal(engine: Engine) -> None:
    """WAL on a SQLite annotation DB (readers do not block the writer). Persistent in the file;
    set outside any transaction (the engine's own connections would begin one)."""
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        mode = cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        cur.close()
    finally:
        raw.close()
    if str(mode).lower() != "wal":
        # E.g. a network file system: SQLite keeps the rollback journal. Durable, but reads
        # then wait for the writer.
        log.warning("%s: SQLite kept journal_mode=%s (WAL unavailable here): reads will queue "
                    "behind writes", engine.url.database, mode)


def downgrade(engine_or_path: Engine | str | Path, revision: str) -> None:
    """Step the DB back to `revision` ("base" drops every table)."""
    cfg = alembic_config()
    with _engine(engine_or_path) as engine:
        _run(engine, cfg, lambda c: command.downgrade(c, revision))


def current(engine_or_path: Engine | str | Path) -> str | None:
    """The DB's revision; None for an empty or unversioned DB."""
    with _engine(engine_or_path) as engine, engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head() -> str:
    """The newest revision in db/migrations."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m db.migrate", description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=env.read("CIR_DB", "annotations.sqlite"),
                    help="SQLite file or SQLAlchemy URL (default: $CIR_DB or annotations.sqlite)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("upgrade", help="create or migrate the DB (default: to head)")
    up.add_argument("--revision", default="head")
    sub.add_parser("current", help="print the DB's revision")
    sub.add_parser("history", help="list the revisions, newest first, marking the DB's")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "upgrade":
            upgrade(a.db, a.revision)
            print(f"{a.db}: at {current(a.db)}")
        elif a.cmd in ("current", "history"):
            if not is_url(a.db) and not Path(a.db).exists():
                raise SchemaError(f"{a.db}: no such file")
            rev = current(a.db)
            if a.cmd == "current":
                print(rev if rev is not None else "none (empty, or made by create_all: run upgrade)")
            else:
                for s in ScriptDirectory.from_config(alembic_config()).walk_revisions():
                    mark = "  <- current" if s.revision == rev else ""
                    print(f"{s.revision}  {s.doc.splitlines()[0] if s.doc else ''}{mark}")
    except (CIRError, DatabaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except AlembicError as exc:  # `current`/`history` on a DB at a revision this code does not know
        print(f"error: {a.db}: {exc} (known revisions: {', '.join(_known())})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
