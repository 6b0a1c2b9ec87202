"""Questions as data, adjudication, pausing, pairwise sets.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-08

Issue 45. A question is a column in every answer table (db/questions.py, db/question_schema.py):
`preference` (the pairwise sets' core question) and the optional graded `relevance` join
identity and edit; an answer has its mode's core labels, checked by `ck_judgment_answer_or_skip`
(rewritten here). `adjudications` keep a reviewer's decision on a task apart from the judgments
(history in `adjudication_audits`). `query_sets` gain the mode, the questions asked and the audit
share of agreed pairs a reviewer sees; `tasks` a second item (`item_b_id`, '' when pointwise) so a
pairwise task is (query, A, B); `annotators` a pause. Reviewed by hand: every constraint named,
FKs RESTRICT, CHECK texts from the same functions the models use.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

from db.question_schema import add_question, adjudication_answer_sql, in_list, judgment_answer_sql

revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

IDENTITY = ('yes', 'no', 'cant_tell')
EDIT = ('yes', 'partial', 'no')
PREFERENCE = ('a', 'b', 'both', 'neither')
RELEVANCE = ('0', '1', '2', '3')
CORE = {'pointwise': [('identity', IDENTITY), ('edit', EDIT)], 'pairwise': [('preference', PREFERENCE)]}
OLD_ANSWER = ("(status = 'answered' AND identity IS NOT NULL AND edit IS NOT NULL "
              f"AND {in_list('identity', IDENTITY)} AND {in_list('edit', EDIT)}) OR "
              "(status = 'skipped' AND identity IS NULL AND edit IS NULL "
              "AND skip_reason IS NOT NULL AND length(trim(skip_reason)) > 0)")


def _answer_columns() -> list[sa.Column]:
    return [sa.Column(n, sa.String(length=16), nullable=True) for n in ('identity', 'edit', 'preference')]


def upgrade() -> None:
    with op.batch_alter_table('annotators', schema=None) as b:
        b.add_column(sa.Column('paused_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('query_sets', schema=None) as b:
        b.add_column(sa.Column('mode', sa.String(length=16), server_default='pointwise', nullable=False))
        b.add_column(sa.Column('questions', sa.String(length=400), server_default='identity,edit', nullable=False))
        b.add_column(sa.Column('audit_share', sa.Float(), server_default='0', nullable=False))
        b.create_check_constraint('ck_query_set_mode', in_list('mode', ('pointwise', 'pairwise')))
        b.create_check_constraint('ck_query_set_audit_share', 'audit_share >= 0 AND audit_share <= 1')
    with op.batch_alter_table('tasks', schema=None) as b:
        b.add_column(sa.Column('item_b_id', sa.String(length=200), server_default=sa.text("''"), nullable=False))
        b.drop_constraint('uq_task_pair', type_='unique')
        b.create_unique_constraint('uq_task_pair', ['query_id', 'item_id', 'item_b_id'])
        b.create_check_constraint('ck_task_two_items', 'item_b_id <> item_id')
    for table in ('judgments', 'judgment_audits'):
        with op.batch_alter_table(table, schema=None) as b:
            b.add_column(sa.Column('preference', sa.String(length=16), nullable=True))
            if table == 'judgments':
                b.drop_constraint('ck_judgment_answer_or_skip', type_='check')
                b.create_check_constraint('ck_judgment_answer_or_skip', judgment_answer_sql(CORE))
    op.create_table('adjudications',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('reviewer_id', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=16), nullable=False),
    *_answer_columns(),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint(in_list('reason', ('disagreement', 'audit')), name='ck_adjudication_reason'),
    sa.CheckConstraint(adjudication_answer_sql(CORE), name='ck_adjudication_answer'),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], ondelete='RESTRICT', name='fk_adjudications_task_id_tasks'),
    sa.ForeignKeyConstraint(['reviewer_id'], ['annotators.id'], ondelete='RESTRICT',
                            name='fk_adjudications_reviewer_id_annotators'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('task_id', name='uq_adjudication_task')
    )
    with op.batch_alter_table('adjudications', schema=None) as b:
        b.create_index(b.f('ix_adjudications_reviewer_id'), ['reviewer_id'], unique=False)
    op.create_table('adjudication_audits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('adjudication_id', sa.Integer(), nullable=False),
    sa.Column('reviewer_id', sa.Integer(), nullable=False),
    *_answer_columns(),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('changed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['adjudication_id'], ['adjudications.id'], ondelete='RESTRICT',
                            name='fk_adjudication_audits_adjudication_id_adjudications'),
    sa.ForeignKeyConstraint(['reviewer_id'], ['annotators.id'], ondelete='RESTRICT',
                            name='fk_adjudication_audits_reviewer_id_annotators'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('adjudication_audits', schema=None) as b:
        b.create_index(b.f('ix_adjudication_audits_adjudication_id'), ['adjudication_id'], unique=False)
        b.create_index(b.f('ix_adjudication_audits_reviewer_id'), ['reviewer_id'], unique=False)
    add_question('relevance', RELEVANCE)


def downgrade() -> None:
    """Back to 0002: pairwise sets, decisions, pauses and the new answers are dropped (a
    pairwise task would break the old unique (query, item), so refuse while there are any)."""
    conn = op.get_bind()
    if conn.execute(sa.text("SELECT count(*) FROM tasks WHERE item_b_id <> ''")).scalar():
        raise RuntimeError("pairwise tasks exist: a downgrade to 0002 would lose them; export first")
    op.drop_table('adjudication_audits')
    op.drop_table('adjudications')
    for table in ('judgments', 'judgment_audits'):
        with op.batch_alter_table(table, schema=None) as b:
            if table == 'judgments':
                b.drop_constraint('ck_judgment_relevance', type_='check')
                b.drop_constraint('ck_judgment_answer_or_skip', type_='check')
                b.create_check_constraint('ck_judgment_answer_or_skip', OLD_ANSWER)
            b.drop_column('relevance')
            b.drop_column('preference')
    with op.batch_alter_table('tasks', schema=None) as b:
        b.drop_constraint('ck_task_two_items', type_='check')
        b.drop_constraint('uq_task_pair', type_='unique')
        b.create_unique_constraint('uq_task_pair', ['query_id', 'item_id'])
        b.drop_column('item_b_id')
    with op.batch_alter_table('query_sets', schema=None) as b:
        b.drop_constraint('ck_query_set_audit_share', type_='check')
        b.drop_constraint('ck_query_set_mode', type_='check')
        b.drop_column('audit_share')
        b.drop_column('questions')
        b.drop_column('mode')
    with op.batch_alter_table('annotators', schema=None) as b:
        b.drop_column('paused_at')
