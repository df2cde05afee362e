"""merge integrity: the approved change identity, the verified head, reply rate limits

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("change_identity", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("verified_sha", sa.String(length=64), nullable=True))
    op.create_table(
        "command_replies",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("project_id", sa.BigInteger(), nullable=False),
        sa.Column("mr_iid", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("last_reply_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_command_replies")),
        sa.UniqueConstraint(
            "project_id", "mr_iid", "user_id", name=op.f("uq_command_replies_project_id")
        ),
    )


def downgrade() -> None:
    op.drop_table("command_replies")
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_column("verified_sha")
        batch_op.drop_column("change_identity")
