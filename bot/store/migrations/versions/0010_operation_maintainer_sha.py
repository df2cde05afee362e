"""operations.maintainer_sha: the MR head a Maintainer's `/gitops apply` was given at

A Maintainer's authority (to change `.gitops/bot.yml` and the paths its `paths.protected`
lists) covers what the Maintainer saw: the merge request at this head. A head that moved after
the apply is not covered (bot/app/steps/paths.py). Existing operations get none: a Maintainer's
request still in flight has no head bound to it, so its Maintainer-only paths stop it until a
Maintainer applies again (fail closed).

A plain ADD COLUMN (no table copy on SQLite), so migration 0006's triggers stay in place.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("operations", sa.Column("maintainer_sha", sa.String(length=64), nullable=True))


def downgrade() -> None:
    # a plain DROP COLUMN as well (SQLite 3.35+): a batch copy would drop 0006's triggers
    op.drop_column("operations", "maintainer_sha")
