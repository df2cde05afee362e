"""api_clients: named REST API clients with hashed tokens; operations.api_client

Each client of the REST API has its own token (only its SHA-256 is stored), scopes (`read`,
`submit`, `operate`, `admin`), optionally the projects it may act on, and whether it may state
`requested_by` for users (bot/store/clients.py). An operation records the client that submitted
it; the audit rows of an API action name the client in `actor` (`<client>` or `<user> via
<client>`), so audit_log keeps its columns and migration 0011's append-only triggers.

A new table and a plain ADD COLUMN on operations (no table copy on SQLite), so migration 0006's
triggers stay in place; existing operations get none.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_clients",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("projects", sa.JSON(), nullable=False),
        sa.Column("on_behalf", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_clients")),
        sa.UniqueConstraint("name", name=op.f("uq_api_clients_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_clients_token_hash")),
    )
    op.add_column("operations", sa.Column("api_client", sa.String(length=64), nullable=True))


def downgrade() -> None:
    # a plain DROP COLUMN (SQLite 3.35+): a batch copy would drop 0006's triggers
    op.drop_column("operations", "api_client")
    op.drop_table("api_clients")
