"""The annotation DB's SQLite connection settings: WAL, FK enforcement and write-lock-at-BEGIN.

`open_db(path)` returns SQLAlchemy's `Engine` for the file; `db.migrate.init_db` brings its schema
to the newest revision."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

BUSY_TIMEOUT_MS = 5000


def open_db(path: str | Path) -> Engine:
    """Engine on the SQLite file at `path`, with the pragmas applied to every new connection."""
    engine = create_engine(
        f"sqlite:///{Path(path)}",
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
            # WAL: readers don't block the writer; persists in the file but is cheap to re-issue.
            cur.execute("PRAGMA journal_mode=WAL")
            # Wait for a competing writer instead of failing at once with "database is locked".
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            # SQLite leaves FKs off by default, per connection; RESTRICT means nothing without it.
            cur.execute("PRAGMA foreign_keys=ON")
            # Durable across app crashes in WAL mode; only an OS crash can drop the last commits.
            cur.execute("PRAGMA synchronous=NORMAL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Take the write lock up front: a deferred BEGIN that later upgrades read->write can hit
        # SQLITE_BUSY immediately (busy_timeout can't help a lock upgrade in a read snapshot).
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Session maker bound to `engine`; objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)
