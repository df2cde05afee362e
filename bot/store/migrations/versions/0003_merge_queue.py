"""merge queue: one line of changes per (project, target branch); pipeline hooks seen and the
label last set, per operation; whether its project uses GitLab's merge trains

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("pipeline_hook_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("label_set", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("merge_train", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("merge_train_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "merge_queue",
        sa.Column("operation_id", sa.String(length=36), nullable=False),
        sa.Column("project", sa.String(length=255), nullable=False),
        sa.Column("target_branch", sa.String(length=255), nullable=False),
        sa.Column("rank", sa.BigInteger(), nullable=False),
        sa.Column("entered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("head_since", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("operation_id", name=op.f("pk_merge_queue")),
    )
    op.create_index(
        "ix_merge_queue_line", "merge_queue", ["project", "target_branch", "rank"], unique=False
    )
    # changes already merging when the bot is upgraded join their queues in the order they
    # last moved (the closest record of when they entered MERGING)
    op.execute(
        """
        INSERT INTO merge_queue (operation_id, project, target_branch, rank, entered_at)
        SELECT o.id, o.project, o.target_branch, 0, o.updated_at
        FROM operations o JOIN bindings b ON b.operation_id = o.id
        WHERE b.state = 'MERGING'
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_column("merge_train_at")
        batch_op.drop_column("merge_train")
        batch_op.drop_column("label_set")
        batch_op.drop_column("pipeline_hook_at")
    op.drop_index("ix_merge_queue_line", table_name="merge_queue")
    op.drop_table("merge_queue")
