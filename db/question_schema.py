"""The schema a question brings, as SQL the models and the migrations share: one column per
question in the answer tables, CHECKs on its values, `tasks.gold_<name>` for a gold question; and
`add_question` / `drop_question`, what a migration adding a question calls.

The CHECKs are written from explicit values, so a migration freezes the values it was written
for (`add_question("relevance", ("0", "1", "2", "3"))`), while the models write them from the
registry (`db/questions.py`); `tests/test_migrations.py` fails when the two differ.

- `judgments`: the *core* questions of a mode are answered together or not at all (an answer of a
  pointwise set has identity and edit and no preference; of a pairwise set a preference and
  neither of the others); a skip has no answer and a reason (`ck_judgment_answer_or_skip`). Any
  other question has its own CHECK: NULL, or one of its values on an answered judgment
  (`ck_judgment_<name>`). Which optional questions a set asks is checked in code (db.judgments).
- `adjudications`: the same core rule without a status (`ck_adjudication_answer`), and
  `ck_adjudication_<name>` for the others.
"""
from __future__ import annotations

from typing import Mapping, Sequence

# The tables that hold one column per question (history tables carry no CHECK, as before).
ANSWER_TABLES = ("judgments", "judgment_audits", "adjudications", "adjudication_audits")
COLUMN_LENGTH = 16
Core = Mapping[str, Sequence[tuple[str, Sequence[str]]]]  # mode -> (question, values) of its core questions


def in_list(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _core_rule(core: Core, mode: str) -> str:
    mine = [f"{n} IS NOT NULL AND {in_list(n, v)}" for n, v in core[mode]]
    others = [f"{n} IS NULL" for m, qs in core.items() if m != mode for n, _ in qs]
    return "(" + " AND ".join(mine + others) + ")"


def judgment_answer_sql(core: Core) -> str:
    """`ck_judgment_answer_or_skip`. The explicit IS NOT NULLs matter: `NULL IN (...)` is NULL,
    and a CHECK that evaluates to NULL passes."""
    rules = " OR ".join(_core_rule(core, m) for m in core)
    none = " AND ".join(f"{n} IS NULL" for qs in core.values() for n, _ in qs)
    return (f"(status = 'answered' AND skip_reason IS NULL AND ({rules})) OR "
            f"(status = 'skipped' AND {none} AND skip_reason IS NOT NULL AND length(trim(skip_reason)) > 0)")


def adjudication_answer_sql(core: Core) -> str:
    """`ck_adjudication_answer`: a decision answers its mode's core questions, none of the others'."""
    return " OR ".join(_core_rule(core, m) for m in core)


def judgment_extra_sql(name: str, values: Sequence[str]) -> str:
    """`ck_judgment_<name>` for a question that is not core."""
    return f"{name} IS NULL OR (status = 'answered' AND {in_list(name, values)})"


def adjudication_extra_sql(name: str, values: Sequence[str]) -> str:
    return f"{name} IS NULL OR {in_list(name, values)}"


def gold_sql(name: str, values: Sequence[str]) -> str:
    """`ck_task_gold_<name>`."""
    return f"gold_{name} IS NULL OR {in_list('gold_' + name, values)}"


def add_question(name: str, values: Sequence[str], gold: bool = False) -> None:
    """In a migration: the columns and CHECKs of a new (non-core) question `name`, whose stored
    values are `values` (as the declaration's, in order)."""
    import sqlalchemy as sa
    from alembic import op

    for table in ANSWER_TABLES:
        with op.batch_alter_table(table, schema=None) as b:
            b.add_column(sa.Column(name, sa.String(length=COLUMN_LENGTH), nullable=True))
            if table == "judgments":
                b.create_check_constraint(f"ck_judgment_{name}", judgment_extra_sql(name, values))
            elif table == "adjudications":
                b.create_check_constraint(f"ck_adjudication_{name}", adjudication_extra_sql(name, values))
    if gold:
        with op.batch_alter_table("tasks", schema=None) as b:
            b.add_column(sa.Column(f"gold_{name}", sa.String(length=COLUMN_LENGTH), nullable=True))
            b.create_check_constraint(f"ck_task_gold_{name}", gold_sql(name, values))


def drop_question(name: str, gold: bool = False) -> None:
    """In a migration's downgrade: `add_question` undone (the answers to it are dropped)."""
    from alembic import op

    if gold:
        with op.batch_alter_table("tasks", schema=None) as b:
            b.drop_constraint(f"ck_task_gold_{name}", type_="check")
            b.drop_column(f"gold_{name}")
    for table in ANSWER_TABLES:
        with op.batch_alter_table(table, schema=None) as b:
            if table == "judgments":
                b.drop_constraint(f"ck_judgment_{name}", type_="check")
            elif table == "adjudications":
                b.drop_constraint(f"ck_adjudication_{name}", type_="check")
            b.drop_column(name)
