"""Initial schema: the tables of db/models.py as of commit 01afa60 (skips, gold, assignments).

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Generated with `alembic revision --autogenerate` against an empty DB, then reviewed by hand:
every CHECK and multi-column UNIQUE carries the model's name (ck_*/uq_*), FKs are ON DELETE
RESTRICT, server defaults match the models'. Two single-column UNIQUEs (annotators.name,
query_sets.name) and all FKs are unnamed because the models leave them unnamed; batch mode
keeps them when it copies a table, but a later migration cannot drop them by name.

SQLite can ALTER almost nothing: change tables inside `with op.batch_alter_table(...)`, which
copies the table. Give every new constraint a name (batch mode can only drop named ones) and
review autogenerate's output: it misses CHECKs added to or dropped from an existing
table (test_migrations compares them by name and SQL).
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema: the sets and what was retrieved, then the work on them."""
    _sets_queries_and_items()
    _tasks_and_judgments()


def _sets_queries_and_items() -> None:
    op.create_table('annotators',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', name='uq_annotators_name')
    )
    op.create_table('query_sets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('source', sa.String(length=200), nullable=False),
    sa.Column('overlap', sa.Integer(), server_default='1', nullable=False),
    sa.Column('pool_k', sa.Integer(), server_default='10', nullable=False),
    sa.Column('meta', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('overlap >= 1', name='ck_query_set_overlap'),
    sa.CheckConstraint('pool_k >= 1', name='ck_query_set_pool_k'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', name='uq_query_sets_name')
    )
    op.create_table('queries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('query_set_id', sa.Integer(), nullable=False),
    sa.Column('external_id', sa.String(length=200), nullable=False),
    sa.Column('reference_id', sa.String(length=200), nullable=False),
    sa.Column('edit_text', sa.Text(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['query_set_id'], ['query_sets.id'], ondelete='RESTRICT', name='fk_queries_query_set_id_query_sets'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('query_set_id', 'external_id', name='uq_query_external')
    )
    with op.batch_alter_table('queries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_queries_query_set_id'), ['query_set_id'], unique=False)

    op.create_table('retrieved_items',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('query_id', sa.Integer(), nullable=False),
    sa.Column('method', sa.String(length=100), nullable=False),
    sa.Column('scoring', sa.String(length=100), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.String(length=200), nullable=False),
    sa.Column('score', sa.Float(), nullable=True),
    sa.CheckConstraint('rank >= 1', name='ck_retrieved_rank_positive'),
    sa.ForeignKeyConstraint(['query_id'], ['queries.id'], ondelete='RESTRICT', name='fk_retrieved_items_query_id_queries'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('query_id', 'method', 'scoring', 'rank', name='uq_retrieved_rank')
    )
    with op.batch_alter_table('retrieved_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_retrieved_items_query_id'), ['query_id'], unique=False)


def _tasks_and_judgments() -> None:
    op.create_table('tasks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('query_id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.String(length=200), nullable=False),
    sa.Column('gold_identity', sa.String(length=16), nullable=True),
    sa.Column('gold_edit', sa.String(length=16), nullable=True),
    sa.CheckConstraint("gold_edit IS NULL OR gold_edit IN ('yes', 'partial', 'no')", name='ck_task_gold_edit'),
    sa.CheckConstraint("gold_identity IS NULL OR gold_identity IN ('yes', 'no', 'cant_tell')", name='ck_task_gold_identity'),
    sa.ForeignKeyConstraint(['query_id'], ['queries.id'], ondelete='RESTRICT', name='fk_tasks_query_id_queries'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('query_id', 'item_id', name='uq_task_pair')
    )
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_tasks_query_id'), ['query_id'], unique=False)

    op.create_table('assignments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('query_set_id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('assigned_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('position >= 1', name='ck_assignment_position'),
    sa.ForeignKeyConstraint(['annotator_id'], ['annotators.id'], ondelete='RESTRICT', name='fk_assignments_annotator_id_annotators'),
    sa.ForeignKeyConstraint(['query_set_id'], ['query_sets.id'], ondelete='RESTRICT', name='fk_assignments_query_set_id_query_sets'),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], ondelete='RESTRICT', name='fk_assignments_task_id_tasks'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('annotator_id', 'query_set_id', 'position', name='uq_assignment_position'),
    sa.UniqueConstraint('annotator_id', 'task_id', name='uq_assignment_annotator_task')
    )
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assignments_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignments_query_set_id'), ['query_set_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignments_task_id'), ['task_id'], unique=False)

    op.create_table('judgments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), server_default='answered', nullable=False),
    sa.Column('identity', sa.String(length=16), nullable=True),
    sa.Column('edit', sa.String(length=16), nullable=True),
    sa.Column('skip_reason', sa.Text(), nullable=True),
    sa.Column('comment', sa.Text(), nullable=True),
    sa.Column('time_spent_ms', sa.Integer(), nullable=False),
    sa.Column('shown_position', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("(status = 'answered' AND identity IS NOT NULL AND edit IS NOT NULL AND identity IN ('yes', 'no', 'cant_tell') AND edit IN ('yes', 'partial', 'no')) OR (status = 'skipped' AND identity IS NULL AND edit IS NULL AND skip_reason IS NOT NULL AND length(trim(skip_reason)) > 0)", name='ck_judgment_answer_or_skip'),
    sa.CheckConstraint("status IN ('answered', 'skipped')", name='ck_judgment_status'),
    sa.CheckConstraint('time_spent_ms >= 0', name='ck_judgment_time_nonneg'),
    sa.ForeignKeyConstraint(['annotator_id'], ['annotators.id'], ondelete='RESTRICT', name='fk_judgments_annotator_id_annotators'),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], ondelete='RESTRICT', name='fk_judgments_task_id_tasks'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('annotator_id', 'task_id', name='uq_judgment_annotator_task')
    )
    with op.batch_alter_table('judgments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_judgments_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_judgments_task_id'), ['task_id'], unique=False)

    op.create_table('judgment_audits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('judgment_id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), server_default='answered', nullable=False),
    sa.Column('identity', sa.String(length=16), nullable=True),
    sa.Column('edit', sa.String(length=16), nullable=True),
    sa.Column('skip_reason', sa.Text(), nullable=True),
    sa.Column('comment', sa.Text(), nullable=True),
    sa.Column('changed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['judgment_id'], ['judgments.id'], ondelete='RESTRICT', name='fk_judgment_audits_judgment_id_judgments'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('judgment_audits', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_judgment_audits_judgment_id'), ['judgment_id'], unique=False)


def downgrade() -> None:
    """Drop every table, children first (dropping a table drops its indexes)."""
    for table in ("judgment_audits", "judgments", "assignments", "tasks", "retrieved_items",
                  "queries", "query_sets", "annotators"):
        op.drop_table(table)
