"""operations.callback_url and outbox.dedupe_key: completion callbacks for API submitters

`callback_url` is where an API submitter asked to be told of each phase change (README,
"Completion callbacks"); `dedupe_key` makes a callback row unique per (operation, phase), so a
transition written twice enqueues one delivery. Both nullable: nothing existing changes, and
adding a column writes no row (the state triggers of 0006 are not involved).

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMN on both backends: a batch copy on SQLite would drop 0006's triggers
    op.add_column("operations", sa.Column("callback_url", sa.String(length=2048), nullable=True))
    op.add_column("outbox", sa.Column("dedupe_key", sa.String(length=128), nullable=True))
    op.create_index("ix_outbox_dedupe_key", "outbox", ["dedupe_key"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_outbox_dedupe_key", table_name="outbox")
    op.drop_column("outbox", "dedupe_key")
    op.drop_column("operations", "callback_url")
