"""operations.ci_closure: the CI configuration's protected closure a change was checked against

The files the project's CI configuration includes, walked to the end at one commit
(bot/app/ci_closure.py): the commit, the `ci_config_path` walked from, each protected pattern
with the include that named it, and whether it may be used again for the same commit. The
check right before the merge (bot/app/steps/integrity.py) reads the target branch's head and
uses this record instead of reading the CI files again when the head is the commit walked.
Existing operations get none: their next check walks the configuration again.

A plain ADD COLUMN (no table copy on SQLite), so migration 0006's triggers stay in place.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("operations", sa.Column("ci_closure", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    # a plain DROP COLUMN as well (SQLite 3.35+): a batch copy would drop 0006's triggers
    op.drop_column("operations", "ci_closure")
