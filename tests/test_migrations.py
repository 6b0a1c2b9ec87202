"""Alembic migrations: head equals the models, down/up round trip, legacy create_all DBs, CLI."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import CheckConstraint, Engine, MetaData, inspect, select, text

from db import migrate
from db.migrate import SchemaError, init_db, schema_diffs
from db.models import Annotator, Base
from db.sqlite import open_db, session_factory


@pytest.fixture()
def engine(tmp_path: Path) -> Engine:
    eng = open_db(tmp_path / "ann.sqlite")
    yield eng
    eng.dispose()


def _named_constraints(eng: Engine) -> dict[str, set[str]]:
    """table -> the names in its `CONSTRAINT name ...` clauses, read from sqlite_master's SQL."""
    with eng.connect() as c:
        rows = c.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                              "AND name NOT IN ('alembic_version', 'sqlite_sequence')")).all()
    return {name: set(re.findall(r"CONSTRAINT (\w+)", sql)) for name, sql in rows}


def _create_all(path: Path, metadata: MetaData = Base.metadata) -> Engine:
    eng = open_db(path)
    metadata.create_all(eng)
    return eng


def test_upgrade_from_empty_equals_models(engine: Engine, tmp_path: Path) -> None:
    migrate.upgrade(engine)
    with engine.connect() as c:
        mc = MigrationContext.configure(c, opts={"compare_type": True, "compare_server_default": True})
        assert compare_metadata(mc, Base.metadata) == []
        # compare_metadata skips CHECKs on SQLite; this also compares them by name and SQL.
        assert schema_diffs(c) == []
        assert inspect(c).get_table_names().count("alembic_version") == 1
    reference = _create_all(tmp_path / "create_all.sqlite")
    names = _named_constraints(engine)
    assert names == _named_constraints(reference)
    # A few by hand, so an empty comparison cannot pass unnoticed.
    assert {"uq_judgment_annotator_task", "ck_judgment_answer_or_skip",
            "ck_judgment_time_nonneg"} <= names["judgments"]
    assert migrate.current(engine) == migrate.head()
    reference.dispose()


def test_downgrade_to_base_then_upgrade(engine: Engine) -> None:
    migrate.upgrade(engine)
    migrate.downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    assert migrate.current(engine) is None
    migrate.upgrade(engine)
    with engine.connect() as c:
        assert schema_diffs(c) == []
    assert migrate.current(engine) == migrate.head()


def test_init_db_idempotent_and_keeps_data(engine: Engine) -> None:
    init_db(engine)
    with session_factory(engine)() as s:
        s.add(Annotator(name="ann0"))
        s.commit()
    init_db(engine)
    init_db(engine)
    with session_factory(engine)() as s:
        assert s.scalars(select(Annotator.name)).all() == ["ann0"]
    with engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
        # env.py turns FKs off while migrating; the pooled connection must get them back.
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_legacy_create_all_db_is_stamped(tmp_path: Path) -> None:
    eng = _create_all(tmp_path / "legacy.sqlite")
    with session_factory(eng)() as s:
        s.add(Annotator(name="before-migrations"))
        s.commit()
    assert migrate.current(eng) is None
    init_db(eng)
    assert migrate.current(eng) == migrate.head()
    with session_factory(eng)() as s:
        assert s.scalars(select(Annotator.name)).all() == ["before-migrations"]
    eng.dispose()


def _metadata_without(constraint_name: str) -> MetaData:
    md = MetaData(naming_convention=Base.metadata.naming_convention)  # same constraint names
    for table in Base.metadata.sorted_tables:
        table.to_metadata(md)
    for table in md.tables.values():
        for c in list(table.constraints):
            if isinstance(c, CheckConstraint) and c.name == constraint_name:
                table.constraints.discard(c)
                return md
    raise AssertionError(f"no CHECK named {constraint_name}")


def test_legacy_db_that_differs_is_refused(tmp_path: Path) -> None:
    # Missing one CHECK: invisible to compare_metadata, so this tests our own comparison.
    eng = _create_all(tmp_path / "old.sqlite", _metadata_without("ck_judgment_time_nonneg"))
    with eng.connect() as c:
        mc = MigrationContext.configure(c)
        assert compare_metadata(mc, Base.metadata) == []
        assert any("ck_judgment_time_nonneg" in d for d in schema_diffs(c))
    with pytest.raises(SchemaError, match="ck_judgment_time_nonneg"):
        init_db(eng)
    assert "alembic_version" not in inspect(eng).get_table_names()  # left as it was
    eng.dispose()


def test_failed_migration_leaves_nothing(engine: Engine, tmp_path: Path) -> None:
    """env.py runs all pending revisions in one transaction: a failing one rolls them all back."""
    scripts = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    head = migrate.head()
    (scripts / "versions" / "9999_broken.py").write_text(
        "import sqlalchemy as sa\nfrom alembic import op\n"
        f"revision = '9999'\ndown_revision = '{head}'\nbranch_labels = depends_on = None\n"
        "def upgrade():\n"
        "    with op.batch_alter_table('judgments') as b:\n"
        "        b.add_column(sa.Column('extra', sa.Integer(), nullable=True))\n"
        "    raise RuntimeError('boom')\n"
        "def downgrade():\n    pass\n")
    cfg = migrate.alembic_config()
    cfg.set_main_option("script_location", str(scripts))
    with engine.connect() as c:
        cfg.attributes["connection"] = c
        with pytest.raises(RuntimeError, match="boom"):
            command.upgrade(cfg, "head")
    # Not even 0001 stayed: the file is as empty as before.
    assert inspect(engine).get_table_names() == []


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "cli.sqlite")
    assert migrate.main(["--db", db, "upgrade"]) == 0
    assert migrate.main(["--db", db, "current"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == migrate.head()
    assert migrate.main(["--db", db, "history"]) == 0
    assert "<- current" in capsys.readouterr().out
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 10)
    assert migrate.main(["--db", str(bad), "upgrade"]) == 1
    assert "not a usable annotation database" in capsys.readouterr().err
    assert migrate.main(["--db", str(tmp_path / "missing.sqlite"), "current"]) == 1
    assert not (tmp_path / "missing.sqlite").exists()


def test_0003_keeps_a_campaign_made_before_it(engine: Engine) -> None:
    """A 0002 database with a set, tasks and answers: after 0003 the set is pointwise and asks
    identity and edit, its tasks have no item B, every answer is there and still checked; a
    pairwise task then blocks the downgrade (it would break the old unique (query, item))."""
    from sqlalchemy.exc import IntegrityError

    migrate.upgrade(engine, "0002")
    with engine.begin() as c:
        c.execute(text("INSERT INTO annotators (id, name, created_at) VALUES (1, 'ann', '2026-12-01')"))
        c.execute(text("INSERT INTO query_sets (id, name, source, overlap, pool_k, created_at, secret) "
                       "VALUES (1, 's', 'test', 2, 5, '2026-12-01', :k)"), {"k": "ab" * 32})
        c.execute(text("INSERT INTO queries (id, query_set_id, external_id, reference_id, edit_text) "
                       "VALUES (1, 1, 'q0', 'r0', 'make it red')"))
        c.execute(text("INSERT INTO tasks (id, query_id, item_id, gold_identity) VALUES (1, 1, 'x', 'yes'), (2, 1, 'y', NULL)"))
        c.execute(text("INSERT INTO judgments (id, annotator_id, task_id, status, identity, edit, skip_reason, "
                       "time_spent_ms, shown_position, created_at, updated_at) VALUES (1, 1, 1, 'answered', 'yes', "
                       "'partial', NULL, 5, 1, '2026-12-01', '2026-12-01'), (2, 1, 2, 'skipped', NULL, NULL, 'blurry', "
                       "3, 2, '2026-12-01', '2026-12-01')"))
    migrate.upgrade(engine)
    with engine.connect() as c:
        assert schema_diffs(c) == []
        assert c.execute(text("SELECT mode, questions, audit_share FROM query_sets")).one() == ("pointwise", "identity,edit", 0.0)
        assert c.execute(text("SELECT id, item_id, item_b_id FROM tasks ORDER BY id")).all() == [(1, "x", ""), (2, "y", "")]
        assert c.execute(text("SELECT identity, edit, relevance, preference, skip_reason FROM judgments ORDER BY id")).all() \
            == [("yes", "partial", None, None, None), (None, None, None, None, "blurry")]
    with pytest.raises(IntegrityError):  # the rewritten check: a pointwise answer has no preference
        with engine.begin() as c:
            c.execute(text("UPDATE judgments SET preference = 'a' WHERE id = 1"))
    with engine.begin() as c:
        c.execute(text("INSERT INTO tasks (id, query_id, item_id, item_b_id) VALUES (3, 1, 'x', 'y')"))
    with pytest.raises(RuntimeError, match="pairwise tasks exist"):
        migrate.downgrade(engine, "0002")
    assert migrate.current(engine) == migrate.head()  # nothing was undone
    with engine.begin() as c:
        c.execute(text("DELETE FROM tasks WHERE id = 3"))
    migrate.downgrade(engine, "0002")
    with engine.connect() as c:
        assert c.execute(text("SELECT identity, edit FROM judgments ORDER BY id")).all() == [("yes", "partial"), (None, None)]
