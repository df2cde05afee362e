"""bindings.state_since: when a binding entered its state (the gitops_state_seconds histogram)

Existing bindings get none: the time they have spent in their state is not known without the
audit log, so the first transition out of it is not observed.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bindings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("state_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bindings", schema=None) as batch_op:
        batch_op.drop_column("state_since")
