"""The annotation DB's connection: a SQLite file (the default) or a server database by URL.

`open_db(target)` takes a file path or a SQLAlchemy URL (`sqlite:///file`, `postgresql://...`)
and returns SQLAlchemy's `Engine`; `db.migrate.init_db` brings its schema to the newest revision.

SQLite: FK enforcement, `synchronous=FULL` (a commit returns only once the WAL is fsynced, so an
acknowledged write survives an OS crash or a power cut, not just a crash of the app), and the
write lock taken at BEGIN (`BEGIN IMMEDIATE`) for sessions that write; `read_session_factory`
gives sessions that begin a plain (deferred) transaction, so reads run in parallel with each
other and with the one writer (WAL snapshots) instead of queueing on the write lock. WAL itself
is switched on by `db.migrate.init_db` once the file is known to be ours (it persists in the
file): opening a file never changes it. PostgreSQL: see `db.postgres` (row locks where SQLite
relies on the file lock).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from cir_core.errors import CIRError

BUSY_TIMEOUT_MS = 5000
READ_OPTION = "cir_read_only"  # execution option: begin a deferred (read) transaction
# FULL: in WAL mode every commit fsyncs the WAL before it returns (what makes an acknowledged
# answer durable past an OS crash; the cost is measured by bench/bench_durability.py). NORMAL
# fsyncs only at checkpoints: safe from a crash of the app, not of the machine.
SYNCHRONOUS = ("FULL", "NORMAL")


class EmptyDatabaseFile(CIRError):
    """The SQLite file exists but holds nothing (0 bytes): a truncated copy or a file made by
    mistake, never one of ours (a new database is a missing file). It used to be silently turned
    into a fresh campaign database, hiding the loss."""


def is_url(target: str | Path) -> bool:
    return isinstance(target, str) and "://" in target


def db_url(target: str | Path) -> URL:
    """The SQLAlchemy URL of a path or URL string (a bare path is a SQLite file)."""
    if is_url(target):
        url = make_url(str(target))
        if url.get_backend_name() == "postgresql" and url.get_driver_name() in ("", "psycopg2"):
            url = _pg_driver(url)
        return url
    return make_url(f"sqlite:///{Path(target)}")


def _pg_driver(url: URL) -> URL:
    """`postgresql://` names psycopg2 by default; use psycopg (3) when that is what is installed."""
    if url.get_driver_name() == "psycopg2":
        return url
    try:
        import psycopg2  # noqa: F401
        return url
    except ImportError:
        return url.set(drivername="postgresql+psycopg")


def describe(target: str | Path) -> str:
    """A path or URL for messages and logs: never the password."""
    if is_url(target):
        return db_url(target).render_as_string(hide_password=True)
    return str(target)


def open_db(target: str | Path, synchronous: str = "FULL") -> Engine:
    """Engine on the SQLite file at `target` (pragmas applied to every new connection), or on
    the database a URL names. `synchronous="NORMAL"` exists to measure what FULL costs (and to
    show in the fault test what it buys); the app never asks for it."""
    if synchronous not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}")
    url = db_url(target)
    backend = url.get_backend_name()
    if backend == "postgresql":
        from db.postgres import open_postgres

        return open_postgres(url)
    if backend != "sqlite":
        raise ValueError(f"unsupported annotation DB {describe(target)!r}: a SQLite file or a "
                         "postgresql:// URL")
    path = url.database or ""
    if path and path != ":memory:" and os.path.isfile(path) and os.path.getsize(path) == 0:
        raise EmptyDatabaseFile(f"{path} is an empty file (0 bytes), not an annotation database: a "
                                "truncated copy or a file made by mistake. Move it away to start a new "
                                "database, or restore a snapshot (python -m db.snapshot restore).")
    engine = create_engine(
        url,
        # Gradio handlers run on worker threads; each checkout is still one thread at a time.
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # SQLAlchemy's pysqlite recipe: stop the driver's own implicit BEGIN (deferred, and
        # skipped before some statements) so we control transactions ourselves below.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            # No journal_mode here: WAL persists in the file, and a file that turns out not to be
            # an annotation DB must be refused unchanged (init_db switches WAL on after checking).
            # Wait for a competing writer instead of failing at once with "database is locked".
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            # SQLite leaves FKs off by default, per connection; RESTRICT means nothing without it.
            cur.execute("PRAGMA foreign_keys=ON")
            # Per connection, not stored in the file: every connection must set it.
            cur.execute(f"PRAGMA synchronous={synchronous}")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get(READ_OPTION):
            # A read: a deferred BEGIN takes no lock; WAL gives it a snapshot while one writer
            # commits. Never write in such a session (the upgrade to a write lock can fail).
            conn.exec_driver_sql("BEGIN")
            return
        # Take the write lock up front: a deferred BEGIN that later upgrades read->write can hit
        # SQLITE_BUSY immediately (busy_timeout can't help a lock upgrade in a read snapshot).
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Session maker bound to `engine`; objects stay readable after commit. On SQLite every
    transaction takes the write lock at BEGIN: use it for anything that may write."""
    return sessionmaker(bind=engine, expire_on_commit=False)


def read_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Session maker for read-only work: on SQLite a deferred BEGIN (no write lock, parallel
    with other reads and the writer); elsewhere the same as `session_factory`."""
    return sessionmaker(bind=engine.execution_options(**{READ_OPTION: True}), expire_on_commit=False)
