"""operations.policy_sha, policy, maintainer_request: the repository policy a change follows

The commit of the target branch `.gitops/bot.yml` was read at when the change started, what the
file set (null: no file, the environment's settings), and whether a Maintainer requested it (the
policy's protected paths may change). Existing operations get none: they follow the
environment's settings, as before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy_sha", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("policy", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("maintainer_request", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_column("maintainer_request")
        batch_op.drop_column("policy")
        batch_op.drop_column("policy_sha")
