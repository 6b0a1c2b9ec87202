"""PostgreSQL as the annotation DB: when a campaign outgrows one app process, several app replicas
share one server database (`--db postgresql://user:pass@host/dbname`).

Same models, same Alembic migrations, same queue. What SQLite gets from its one file lock
(`BEGIN IMMEDIATE` serialises every writer), PostgreSQL gets from row locks taken by the queue
(`SELECT ... FOR UPDATE`, see db/queue.py):
- every write of an annotator first locks that annotator's row, so one person's answers, claims
  and queue positions are serialised even across replicas (two tabs, a retried request);
- a claim also locks the query set's row, so the overlap count (how many annotators hold a task)
  cannot be exceeded by two replicas claiming the last slot at once;
- new annotators are inserted with `ON CONFLICT DO NOTHING`, judgments are updated in place under
  the annotator lock, so a repeated request is a no-op as on SQLite.
Migrations take a transaction-scoped advisory lock, so replicas starting together migrate once.

Durability: PostgreSQL acknowledges a commit once its WAL record is flushed to disk
(`synchronous_commit=on`, its default; with `synchronous_standby_names` set, also once a standby
has it). A server or database configured with `synchronous_commit=off` would acknowledge
answers it can still lose to an OS crash (the last few hundred milliseconds of commits), so every
connection of ours sets it back to `on` (`local`, `remote_write`, `remote_apply` are kept); a
server running with `fsync=off` cannot be fixed from here and is logged as an error.

Needs a driver: `pip install "psycopg[binary]"` (in requirements.txt); `postgresql://` URLs use
psycopg 3 unless psycopg2 is installed.
"""
from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL

log = logging.getLogger(__name__)

MIGRATION_LOCK = 0x43495231  # pg_advisory_xact_lock key of the annotation DB's migrations ("CIR1")


def open_postgres(url: URL) -> Engine:
    """Engine on a PostgreSQL database: READ COMMITTED, connections checked before use (a
    restarted server does not fail the next request), a pool sized for the app's worker threads."""
    engine = create_engine(url, pool_pre_ping=True, pool_size=16, max_overflow=16, pool_timeout=30,
                           isolation_level="READ COMMITTED", connect_args={"connect_timeout": 10})
    warned: set[str] = set()

    @event.listens_for(engine, "connect")
    def _durable(dbapi_conn: Any, _record: Any) -> None:
        durable_commits(dbapi_conn, warned)

    return engine


def durable_commits(dbapi_conn: Any, warned: set[str]) -> None:
    """On a new connection: commits wait for the WAL flush (`synchronous_commit` not `off`);
    `fsync=off` on the server is logged (once per engine), since nothing here can undo it."""
    cur = dbapi_conn.cursor()
    try:
        cur.execute("SHOW synchronous_commit")
        if cur.fetchone()[0] == "off":
            cur.execute("SET SESSION synchronous_commit = on")
            if "sync" not in warned:
                warned.add("sync")
                log.warning("the annotation DB is configured with synchronous_commit=off: set to "
                            "'on' for this app's connections, so an acknowledged answer is on disk")
        cur.execute("SHOW fsync")
        if cur.fetchone()[0] == "off" and "fsync" not in warned:
            warned.add("fsync")
            log.error("the PostgreSQL server runs with fsync=off: an OS crash can lose or corrupt "
                      "acknowledged answers (set fsync=on in postgresql.conf)")
    finally:
        cur.close()
    # psycopg opens a transaction for the SHOWs; end it, so the pool hands out a clean connection.
    dbapi_conn.commit()
