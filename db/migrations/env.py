"""Alembic environment for the annotation DB (SQLite in batch mode, or PostgreSQL).

Online runs use `db.sqlite.open_db`, so migrations get the same pragmas and BEGIN IMMEDIATE
as the app. `db.migrate` passes its connection in `config.attributes["connection"]`; the alembic
CLI gives the file or URL with `-x db=FILE|URL` (else the ini's sqlalchemy.url). On PostgreSQL
every pending revision runs in one transaction (DDL is transactional there too) under an
advisory lock, so app replicas starting together migrate once.
"""
from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from db.models import Base
from db.sqlite import open_db

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _db_path() -> str:
    override = context.get_x_argument(as_dictionary=True).get("db")
    if override:
        return override
    url = make_url(config.get_main_option("sqlalchemy.url"))
    if url.get_backend_name() == "postgresql":
        return url.render_as_string(hide_password=False)
    if url.get_backend_name() != "sqlite" or not url.database:
        raise SystemExit(f"the annotation DB is a SQLite file or a PostgreSQL URL; got sqlalchemy.url={url!r}")
    return url.database


def _configure(**kw: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        # SQLite can't ALTER most things; batch ops copy the table instead.
        render_as_batch=True,
        compare_type=True,
        compare_server_default=True,
        **kw,
    )


def run_migrations_offline() -> None:
    """Print the SQL instead of running it (`alembic upgrade head --sql`)."""
    from db.sqlite import db_url

    _configure(url=db_url(_db_path()), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _run_on_postgres(conn: Connection) -> None:
    """Every pending migration in ONE transaction under a transaction-scoped advisory lock."""
    from db.postgres import MIGRATION_LOCK

    _configure(connection=conn, transactional_ddl=True)
    with context.begin_transaction():
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        context.run_migrations()


def _run_on(conn: Connection) -> None:
    """Run every pending migration in ONE transaction, foreign keys off, checked before commit."""
    if conn.dialect.name == "postgresql":
        _run_on_postgres(conn)
        return
    if conn.in_transaction():
        # PRAGMA foreign_keys is a no-op inside a transaction, and batch mode's table copy
        # (DROP of a referenced table) would trip RESTRICT FKs.
        raise RuntimeError("run migrations on a connection that has no open transaction")
    raw = conn.connection.driver_connection
    fk_was_on = raw.execute("PRAGMA foreign_keys").fetchone()[0]
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        # transactional_ddl: SQLite DDL is transactional, and make_engine already stopped
        # pysqlite's implicit-transaction handling, so a failed migration leaves nothing behind.
        _configure(connection=conn, transactional_ddl=True)
        with context.begin_transaction():
            context.run_migrations()
            bad = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if bad:
                raise RuntimeError(f"migration broke foreign keys (table, rowid, parent, fk): {bad[:10]}")
    finally:
        raw.execute(f"PRAGMA foreign_keys={'ON' if fk_was_on else 'OFF'}")


def run_migrations_online() -> None:
    conn = config.attributes.get("connection")
    if conn is not None:
        _run_on(conn)
        return
    engine = open_db(_db_path())
    try:
        with engine.connect() as conn:
            _run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
