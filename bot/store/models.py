"""Typed models: operations, bindings, audit log, outbox, inbox, deploy signals, flags, API
clients."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.core.states import BindingState, Flow

#: Integer on SQLite (so it is the rowid and autoincrements), BIGINT elsewhere.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; pass an aware UTC time")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


_NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=_NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), Any: JSON()}


class Binding(Base):
    """One per (subject, target): its coarse state and the operation that owns it now."""

    __tablename__ = "bindings"
    __table_args__ = (UniqueConstraint("subject_id", "target_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subject_id: Mapped[str] = mapped_column(String(255))
    target_key: Mapped[str] = mapped_column(String(255))
    operation_id: Mapped[str] = mapped_column(String(36), unique=True)
    state: Mapped[BindingState] = mapped_column(
        Enum(BindingState, native_enum=False, length=32, validate_strings=True), index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime]
    #: when the binding entered its state: set by fire() when a transition changes the state (not
    #: by moves within it) and by submit; None for one in its state since before migration 0005
    state_since: Mapped[datetime | None]


class Operation(Base):
    """One change request: its step, version, flow, deadline and what it made remotely."""

    __tablename__ = "operations"
    __table_args__ = (
        Index("ix_operations_deadline", "deadline_at"),
        Index("ix_operations_project_mr", "project_id", "mr_iid"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    binding_id: Mapped[int] = mapped_column(ForeignKey("bindings.id"), index=True)
    subject_id: Mapped[str] = mapped_column(String(255))
    target_key: Mapped[str] = mapped_column(String(255))
    flow: Mapped[Flow] = mapped_column(Enum(Flow, native_enum=False, length=16))
    step: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    #: "change", or "revert" when it undoes `reverts_operation_id`
    kind: Mapped[str] = mapped_column(String(16), default="change")
    reverts_operation_id: Mapped[str | None] = mapped_column(String(36))
    #: the project's path (as requested); project_id is GitLab's numeric id once known
    project: Mapped[str] = mapped_column(String(255))
    project_id: Mapped[int | None] = mapped_column(Integer)
    target_branch: Mapped[str] = mapped_column(String(255))
    title: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    files: Mapped[Any] = mapped_column(JSON, default=list)
    requested_by: Mapped[str] = mapped_column(String(255))
    idempotency_key: Mapped[str | None] = mapped_column(String(255), unique=True)
    request_hash: Mapped[str | None] = mapped_column(String(64))
    #: where the API submitter is told of each phase change (README, "Completion callbacks")
    callback_url: Mapped[str | None] = mapped_column(String(2048))
    # what exists remotely
    mr_iid: Mapped[int | None] = mapped_column(Integer)
    mr_url: Mapped[str | None] = mapped_column(String(1024))
    mr_opened_by_bot: Mapped[bool] = mapped_column(Boolean, default=False)
    branch: Mapped[str | None] = mapped_column(String(255))
    head_sha: Mapped[str | None] = mapped_column(String(64))
    merge_commit_sha: Mapped[str | None] = mapped_column(String(64))
    approval_id: Mapped[str | None] = mapped_column(String(255))
    #: what the approval approves (bot/core/identity.py): project, target branch, the digest of
    #: the (path, content hash) pairs, and for MR-first the head SHA; fixed before the request
    change_identity: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    #: the MR head whose changes were last checked equal to change_identity (approve and merge
    #: are pinned to it); a head only becomes verified by that check
    verified_sha: Mapped[str | None] = mapped_column(String(64))
    #: the target branch's head commit `.gitops/bot.yml` was read at when the change started
    #: (None: not read) and what the file set (None: no file, the environment's settings)
    policy_sha: Mapped[str | None] = mapped_column(String(64))
    policy: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    #: requested by a Maintainer (`/gitops apply`): the policy's protected paths may change
    maintainer_request: Mapped[bool | None] = mapped_column(Boolean)
    #: the MR head that Maintainer's `/gitops apply` was given at: their authority covers that
    #: head only (None: none bound; bot/app/steps/paths.py)
    maintainer_sha: Mapped[str | None] = mapped_column(String(64))
    #: the CI configuration's protected closure the change was last checked against: the commit
    #: walked, the `ci_config_path`, each pattern with the include naming it
    #: (bot/app/ci_closure.py CiClosure.to_json); None: not walked yet
    ci_closure: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    #: the API client that submitted it (bot/store/clients.py; None: not through the API, or
    #: before migration 0013)
    api_client: Mapped[str | None] = mapped_column(String(64))
    #: the change's files with added/removed line counts and its unified diff (cut at a limit),
    #: fixed before its approval is requested (bot/app/checks/preview.py)
    preview: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    #: when a pipeline webhook for its MR first arrived: GitLab's hooks reach the bot for this
    #: MR, so its pipeline waits poll only as a fallback (the `poll.covered_tiers` flag)
    pipeline_hook_at: Mapped[datetime | None]
    #: the gitops:: label the outbox last set on the MR (set again only when the phase's differs)
    label_set: Mapped[str | None] = mapped_column(String(64))
    #: whether its project merges through GitLab's merge trains, and when that was read
    merge_train: Mapped[bool | None] = mapped_column(Boolean)
    merge_train_at: Mapped[datetime | None]
    #: the bot's status comment on the MR, once written (edited in place without a lookup)
    status_note_id: Mapped[int | None] = mapped_column(BigInteger)
    #: sha256 of the body written there last (an unchanged comment is not written again)
    status_note_hash: Mapped[str | None] = mapped_column(String(64))
    approved_at: Mapped[datetime | None]
    merged_at: Mapped[datetime | None]
    # waiting and failure
    deadline_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error_detail: Mapped[str | None] = mapped_column(Text)
    #: where a multi-call step got to (per-account approve attempts, polls of a wait...)
    progress: Mapped[Any | None] = mapped_column(JSON)
    #: a worker running this operation's step holds it until lease_until (one step at a time)
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class AuditEntry(Base):
    """Why it is in this state: one row per transition (and per stale event ignored)."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    operation_id: Mapped[str] = mapped_column(String(36), index=True)
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    event: Mapped[str] = mapped_column(String(32))
    step: Mapped[int] = mapped_column(Integer)
    #: the operation's version after this transition (0 for a stale event, which changes nothing)
    version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str | None] = mapped_column(String(255))
    correlation_id: Mapped[str | None] = mapped_column(String(255))
    detail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]


class OutboxEntry(Base):
    """A side effect that must not be lost, written with the transition, sent after commit."""

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_pending", "sent_at", "next_attempt_at"),
        Index("ix_outbox_dedupe_key", "dedupe_key", unique=True),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    operation_id: Mapped[str] = mapped_column(String(36), index=True)
    effect: Mapped[str] = mapped_column(String(32))
    payload: Mapped[Any | None] = mapped_column(JSON)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    #: when it failed for good (GITOPS_OUTBOX_MAX_ATTEMPTS, a refusal, an unknown kind): never
    #: claimed again until an operator retries it (`gitops-bot outbox retry`)
    dead_at: Mapped[datetime | None]
    #: when an operator dropped it (`gitops-bot outbox drop`): never performed, never claimed
    dropped_at: Mapped[datetime | None]
    dropped_by: Mapped[str | None] = mapped_column(String(255))
    #: a callback row's delivery id, `<operation id>:<phase>`: one row per operation and phase
    dedupe_key: Mapped[str | None] = mapped_column(String(128))


class InboxEntry(Base):
    """A webhook or callback delivery, stored before it is processed; unique on its key."""

    __tablename__ = "inbox"
    __table_args__ = (Index("ix_inbox_status", "status", "received_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    delivery_key: Mapped[str] = mapped_column(String(255), unique=True)
    source: Mapped[str] = mapped_column(String(16))
    event_type: Mapped[str] = mapped_column(String(64))
    body: Mapped[bytes] = mapped_column(LargeBinary)
    headers: Mapped[Any] = mapped_column(JSON, default=dict)
    #: received, processed, quarantined, ignored
    status: Mapped[str] = mapped_column(String(16), default="received")
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    received_at: Mapped[datetime]
    processed_at: Mapped[datetime | None]


class DeploySignal(Base):
    """A deployment's word (callback, deployment event, pipeline), kept for reconciliation."""

    __tablename__ = "deploy_signals"
    __table_args__ = (
        Index("ix_deploy_signals_project_mr", "project_id", "mr_iid"),
        Index("ix_deploy_signals_received", "received_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    source: Mapped[str] = mapped_column(String(16))
    project_id: Mapped[str] = mapped_column(String(255))
    mr_iid: Mapped[int | None] = mapped_column(Integer)
    operation_id: Mapped[str | None] = mapped_column(String(36), index=True)
    sha: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    received_at: Mapped[datetime]


class CommandReply(Base):
    """When the bot last replied to one user on one MR (replies are rate-limited per window)."""

    __tablename__ = "command_replies"
    __table_args__ = (UniqueConstraint("project_id", "mr_iid", "user_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    project_id: Mapped[int] = mapped_column(BigInteger)
    mr_iid: Mapped[int] = mapped_column(BigInteger)
    user_id: Mapped[int] = mapped_column(BigInteger)
    last_reply_at: Mapped[datetime]


class QueueEntry(Base):
    """A change in its target branch's merge queue: entered when its operation moved into
    MERGING (approved, MR pipeline passed), left when it moved out (fire() does both in the
    transition's transaction). Lower rank merges first; a promotion takes the queue's lowest
    rank minus one."""

    __tablename__ = "merge_queue"
    __table_args__ = (Index("ix_merge_queue_line", "project", "target_branch", "rank"),)

    operation_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    project: Mapped[str] = mapped_column(String(255))
    target_branch: Mapped[str] = mapped_column(String(255))
    #: microseconds since the epoch when it entered (or lower, once promoted)
    rank: Mapped[int] = mapped_column(BigInteger)
    entered_at: Mapped[datetime]
    #: since when it has been driven as the head (None while it waits in line)
    head_since: Mapped[datetime | None]


class Flag(Base):
    """A dynamic flag (workflow order, approve implementation, poll tiers), read per use."""

    __tablename__ = "flags"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[datetime]


class ApiClientRow(Base):
    """A named client of the REST API: its token's SHA-256 (never the token), its scopes and
    projects, and whether it may state `requested_by` for users (bot/store/clients.py)."""

    __tablename__ = "api_clients"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    #: hex SHA-256 of the token: a random 256-bit token needs no slow hash, and is found by it
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: scope names (`read`, `submit`, `operate`, `admin`)
    scopes: Mapped[Any] = mapped_column(JSON)
    #: project paths or numeric ids it may act on; empty: every project the bot manages
    projects: Mapped[Any] = mapped_column(JSON)
    on_behalf: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    #: written at most once a minute per client (bot/store/clients.py's TOUCH_SECONDS)
    last_used_at: Mapped[datetime | None]


# Core-level handles for the hot paths (fire, sweeps), typed as Tables for mypy.
OPERATIONS = cast(Table, Operation.__table__)
BINDINGS = cast(Table, Binding.__table__)
AUDIT = cast(Table, AuditEntry.__table__)
OUTBOX = cast(Table, OutboxEntry.__table__)
INBOX = cast(Table, InboxEntry.__table__)
DEPLOY_SIGNALS = cast(Table, DeploySignal.__table__)
FLAGS = cast(Table, Flag.__table__)
COMMAND_REPLIES = cast(Table, CommandReply.__table__)
MERGE_QUEUE = cast(Table, QueueEntry.__table__)
API_CLIENTS = cast(Table, ApiClientRow.__table__)
