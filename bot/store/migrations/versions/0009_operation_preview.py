"""operations.preview: the change's files with their added/removed line counts and its unified
diff (cut at a limit), fixed before its approval is requested (bot/app/checks/preview.py)

A plain ADD COLUMN (no table copy on SQLite), so migration 0006's triggers stay in place;
existing operations get none and show no preview.

Revision ID: 0009
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("operations", sa.Column("preview", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    # a plain DROP COLUMN as well (SQLite 3.35+): a batch copy would drop 0006's triggers
    op.drop_column("operations", "preview")
