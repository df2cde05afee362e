"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("operation_id", sa.String(length=36), nullable=False),
        sa.Column("from_state", sa.String(length=32), nullable=True),
        sa.Column("to_state", sa.String(length=32), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=True),
        sa.Column("correlation_id", sa.String(length=255), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_audit_log_operation_id"), ["operation_id"], unique=False
        )

    op.create_table(
        "bindings",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("subject_id", sa.String(length=255), nullable=False),
        sa.Column("target_key", sa.String(length=255), nullable=False),
        sa.Column("operation_id", sa.String(length=36), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "APPROVAL_SENDING",
                "APPROVAL_SENT",
                "MR_CREATING",
                "MR_CREATED",
                "MERGING",
                "MERGED",
                "VALIDATED",
                "CREATE_FAILED",
                "HANDLE_FAILED",
                "REJECTED",
                "CLOSED",
                name="bindingstate",
                native_enum=False,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bindings")),
        sa.UniqueConstraint("operation_id", name=op.f("uq_bindings_operation_id")),
        sa.UniqueConstraint("subject_id", "target_key", name=op.f("uq_bindings_subject_id")),
    )
    with op.batch_alter_table("bindings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bindings_state"), ["state"], unique=False)

    op.create_table(
        "deploy_signals",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("operation_id", sa.String(length=36), nullable=True),
        sa.Column("sha", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deploy_signals")),
    )
    with op.batch_alter_table("deploy_signals", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_deploy_signals_operation_id"), ["operation_id"], unique=False
        )
        batch_op.create_index(
            "ix_deploy_signals_project_mr", ["project_id", "mr_iid"], unique=False
        )
        batch_op.create_index("ix_deploy_signals_received", ["received_at"], unique=False)

    op.create_table(
        "flags",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_flags")),
    )
    op.create_table(
        "inbox",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("delivery_key", sa.String(length=255), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inbox")),
        sa.UniqueConstraint("delivery_key", name=op.f("uq_inbox_delivery_key")),
    )
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_status", ["status", "received_at"], unique=False)

    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("operation_id", sa.String(length=36), nullable=False),
        sa.Column("effect", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_outbox_operation_id"), ["operation_id"], unique=False)
        batch_op.create_index("ix_outbox_pending", ["sent_at", "next_attempt_at"], unique=False)

    op.create_table(
        "operations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column(
            "binding_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("subject_id", sa.String(length=255), nullable=False),
        sa.Column("target_key", sa.String(length=255), nullable=False),
        sa.Column(
            "flow",
            sa.Enum("APPROVE_FIRST", "MR_FIRST", name="flow", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reverts_operation_id", sa.String(length=36), nullable=True),
        sa.Column("project", sa.String(length=255), nullable=False),
        sa.Column("target_branch", sa.String(length=255), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("requested_by", sa.String(length=255), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=True),
        sa.Column("project_id", sa.Integer(), nullable=True),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("mr_url", sa.String(length=1024), nullable=True),
        sa.Column("mr_opened_by_bot", sa.Boolean(), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=True),
        sa.Column("head_sha", sa.String(length=64), nullable=True),
        sa.Column("merge_commit_sha", sa.String(length=64), nullable=True),
        sa.Column("approval_id", sa.String(length=255), nullable=True),
        sa.Column("status_note_id", sa.BigInteger(), nullable=True),
        sa.Column("status_note_hash", sa.String(length=64), nullable=True),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("merged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error_detail", sa.Text(), nullable=True),
        sa.Column("progress", sa.JSON(), nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["binding_id"], ["bindings.id"], name=op.f("fk_operations_binding_id_bindings")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operations")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_operations_idempotency_key")),
    )
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_operations_binding_id"), ["binding_id"], unique=False)
        batch_op.create_index("ix_operations_deadline", ["deadline_at"], unique=False)
        batch_op.create_index("ix_operations_project_mr", ["project_id", "mr_iid"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_index("ix_operations_project_mr")
        batch_op.drop_index("ix_operations_deadline")
        batch_op.drop_index(batch_op.f("ix_operations_binding_id"))

    op.drop_table("operations")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_pending")
        batch_op.drop_index(batch_op.f("ix_outbox_operation_id"))

    op.drop_table("outbox")
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.drop_index("ix_inbox_status")

    op.drop_table("inbox")
    op.drop_table("flags")
    with op.batch_alter_table("deploy_signals", schema=None) as batch_op:
        batch_op.drop_index("ix_deploy_signals_received")
        batch_op.drop_index("ix_deploy_signals_project_mr")
        batch_op.drop_index(batch_op.f("ix_deploy_signals_operation_id"))

    op.drop_table("deploy_signals")
    with op.batch_alter_table("bindings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bindings_state"))

    op.drop_table("bindings")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_operation_id"))

    op.drop_table("audit_log")
