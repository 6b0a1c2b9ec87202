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

Needs a driver: `pip install "psycopg[binary]"` (in requirements.txt); `postgresql://` URLs use
psycopg 3 unless psycopg2 is installed.
"""
from __future__ import annotations

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL

MIGRATION_LOCK = 0x43495231  # pg_advisory_xact_lock key of the annotation DB's migrations ("CIR1")


def open_postgres(url: URL) -> Engine:
    """Engine on a PostgreSQL database: READ COMMITTED, connections checked before use (a
    restarted server does not fail the next request), a pool sized for the app's worker threads."""
    return create_engine(url, pool_pre_ping=True, pool_size=16, max_overflow=16, pool_timeout=30,
                         isolation_level="READ COMMITTED", connect_args={"connect_timeout": 10})
