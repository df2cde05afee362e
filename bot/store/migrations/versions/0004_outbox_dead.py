"""outbox rows that failed for good: dead (never claimed again until an operator retries them)
and dropped by an operator (never performed)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("dropped_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("dropped_by", sa.String(length=255), nullable=True))
    # rows the old dispatcher called dead (retried daily) are dead now, as of their last error
    op.execute(
        "UPDATE outbox SET dead_at = created_at WHERE sent_at IS NULL AND last_error LIKE 'dead: %'"
    )


def downgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_column("dropped_by")
        batch_op.drop_column("dropped_at")
        batch_op.drop_column("dead_at")
