"""Blind keys and frozen gold feedback: `query_sets.secret`, table `gold_feedback`.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-06

Issue 42. Each query set gets its own random key (filled here for the sets that exist), which seeds
the annotators' orders and gold placement and keys the opaque ids of their exports: the old seed
was the annotator's and the set's names, which an annotator could replay to read the gallery's
layout back from the order. `gold_feedback` keeps the gold accuracy an annotator was shown, frozen
the first time (computed live, it told which pairs were gold). Reviewed by hand after
autogenerate: every constraint named, FKs RESTRICT.
"""
import secrets
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """A key for every set (new ones get theirs from the model), then the feedback table."""
    with op.batch_alter_table('query_sets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('secret', sa.String(length=64), nullable=True))
    conn = op.get_bind()
    sets = sa.table('query_sets', sa.column('id', sa.Integer()), sa.column('secret', sa.String(64)))
    for (set_id,) in conn.execute(sa.select(sets.c.id)).all():
        conn.execute(sets.update().where(sets.c.id == set_id).values(secret=secrets.token_hex(32)))
    with op.batch_alter_table('query_sets', schema=None) as batch_op:
        batch_op.alter_column('secret', existing_type=sa.String(length=64), nullable=False)

    op.create_table('gold_feedback',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('query_set_id', sa.Integer(), nullable=False),
    sa.Column('identity_correct', sa.Integer(), nullable=False),
    sa.Column('identity_n', sa.Integer(), nullable=False),
    sa.Column('edit_correct', sa.Integer(), nullable=False),
    sa.Column('edit_n', sa.Integer(), nullable=False),
    sa.Column('skipped', sa.Integer(), nullable=False),
    sa.Column('shown_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('identity_correct >= 0 AND identity_correct <= identity_n AND edit_correct >= 0 '
                       'AND edit_correct <= edit_n AND skipped >= 0', name='ck_gold_feedback_counts'),
    sa.ForeignKeyConstraint(['annotator_id'], ['annotators.id'], ondelete='RESTRICT',
                            name='fk_gold_feedback_annotator_id_annotators'),
    sa.ForeignKeyConstraint(['query_set_id'], ['query_sets.id'], ondelete='RESTRICT',
                            name='fk_gold_feedback_query_set_id_query_sets'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('annotator_id', 'query_set_id', name='uq_gold_feedback_annotator_set')
    )
    with op.batch_alter_table('gold_feedback', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gold_feedback_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_gold_feedback_query_set_id'), ['query_set_id'], unique=False)


def downgrade() -> None:
    """Drop the feedback table and the keys (orders then follow the old public seed again)."""
    op.drop_table('gold_feedback')
    with op.batch_alter_table('query_sets', schema=None) as batch_op:
        batch_op.drop_column('secret')
