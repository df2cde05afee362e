"""An operation as the jobs see it, its non-state bookkeeping, and the per-operation lease."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Connection, Engine

from bot.core.states import BindingState, Flow, Step
from bot.errors import UnknownOperation
from bot.store.models import BINDINGS, OPERATIONS, utcnow

#: Columns touch() may write: bookkeeping, never state (fire() owns state and guard inputs).
TOUCHABLE = frozenset(
    {
        "deadline_at",
        "attempts",
        "error_detail",
        "progress",
        "head_sha",
        "verified_sha",
        "pipeline_hook_at",
        "label_set",
        "merge_train",
        "merge_train_at",
        "branch",
        "mr_url",
        "merge_commit_sha",
        "project_id",
        "status_note_id",
        "status_note_hash",
        "ci_closure",
    }
)


@dataclass(frozen=True)
class OperationRow:
    """Everything a step needs about its operation, and whether it still owns its binding."""

    id: str
    state: BindingState
    owner: bool
    flow: Flow
    step: Step
    version: int
    kind: str
    project: str
    project_id: int | None
    target_branch: str
    title: str
    description: str
    files: list[dict[str, Any]]
    requested_by: str
    mr_iid: int | None
    mr_url: str | None
    mr_opened_by_bot: bool
    branch: str | None
    head_sha: str | None
    merge_commit_sha: str | None
    approval_id: str | None
    #: what the approval approves (bot/core/identity.py ChangeIdentity.to_json()), once fixed
    change_identity: dict[str, Any] | None
    #: the MR head last checked equal to the identity (approve and merge are pinned to it)
    verified_sha: str | None
    approved: bool
    attempts: int
    deadline_at: datetime | None
    progress: dict[str, Any]
    #: when a pipeline webhook for its MR first arrived (None: none yet)
    pipeline_hook_at: datetime | None = None
    #: its project merges through GitLab's merge trains (None: not asked yet)
    merge_train: bool | None = None
    #: the commit the repository policy was read at (None: not read) and what it set (None: no
    #: file: the environment's settings)
    policy_sha: str | None = None
    policy: dict[str, Any] | None = None
    #: requested by a Maintainer: the policy's protected paths (and the file itself) may change
    maintainer_request: bool = False
    #: the MR head that Maintainer's `/gitops apply` was given at (None: none bound): their
    #: authority covers that head only (bot/app/steps/paths.py)
    maintainer_sha: str | None = None
    #: the CI configuration's closure last checked against (bot/app/ci_closure.py), as recorded
    ci_closure: dict[str, Any] | None = None

    @property
    def gitlab_project(self) -> int | str:
        """How GitLab's API names the project: its numeric id once known, else its path."""
        return self.project_id if self.project_id is not None else self.project


def load(engine: Engine, operation_id: str) -> OperationRow:
    """Reads the operation with its binding's state."""
    query = (
        select(OPERATIONS, BINDINGS.c.state, BINDINGS.c.operation_id.label("owner_id"))
        .join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
        .where(OPERATIONS.c.id == operation_id)
    )
    with engine.connect() as conn:
        row = conn.execute(query).one_or_none()
    if row is None:
        raise UnknownOperation(operation_id)
    r = row._mapping
    return OperationRow(
        id=r["id"],
        state=BindingState(r["state"]),
        owner=r["owner_id"] == r["id"],
        flow=Flow(r["flow"]),
        step=Step(r["step"]),
        version=r["version"],
        kind=r["kind"],
        project=r["project"],
        project_id=r["project_id"],
        target_branch=r["target_branch"],
        title=r["title"],
        description=r["description"],
        files=list(r["files"] or []),
        requested_by=r["requested_by"],
        mr_iid=r["mr_iid"],
        mr_url=r["mr_url"],
        mr_opened_by_bot=bool(r["mr_opened_by_bot"]),
        branch=r["branch"],
        head_sha=r["head_sha"],
        merge_commit_sha=r["merge_commit_sha"],
        approval_id=r["approval_id"],
        change_identity=dict(r["change_identity"]) if r["change_identity"] else None,
        verified_sha=r["verified_sha"],
        pipeline_hook_at=r["pipeline_hook_at"],
        merge_train=r["merge_train"],
        policy_sha=r["policy_sha"],
        policy=dict(r["policy"]) if r["policy"] else None,
        maintainer_request=bool(r["maintainer_request"]),
        maintainer_sha=r["maintainer_sha"],
        ci_closure=dict(r["ci_closure"]) if r["ci_closure"] else None,
        approved=r["approved_at"] is not None,
        attempts=r["attempts"],
        deadline_at=r["deadline_at"],
        progress=dict(r["progress"] or {}),
    )


def touch(engine: Engine, operation_id: str, **fields: Any) -> None:
    """Writes bookkeeping columns (deadline, attempts, progress, remote refs)."""
    unknown = set(fields) - TOUCHABLE
    if unknown:
        raise ValueError(f"touch() cannot set {sorted(unknown)}")
    with engine.begin() as conn:
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == operation_id).values(**fields))


def known_merge_train(engine: Engine, project: str, since: datetime) -> bool | None:
    """Whether `project` merges through merge trains, as an operation of it last read it after
    `since` (None: nobody did). One query."""
    with engine.connect() as conn:
        row = conn.execute(
            select(OPERATIONS.c.merge_train)
            .where(
                OPERATIONS.c.project == project,
                OPERATIONS.c.merge_train.is_not(None),
                OPERATIONS.c.merge_train_at >= since,
            )
            .order_by(OPERATIONS.c.merge_train_at.desc())
            .limit(1)
        ).one_or_none()
    return None if row is None else bool(row.merge_train)


def label_set(engine: Engine, operation_id: str) -> str | None:
    """The gitops:: label the outbox last set on the operation's MR (None: none, or forgotten)."""
    with engine.connect() as conn:
        return conn.execute(
            select(OPERATIONS.c.label_set).where(OPERATIONS.c.id == operation_id)
        ).scalar_one_or_none()


def preview_of(engine: Engine, operation_id: str) -> dict[str, Any] | None:
    """The change's preview as recorded before its approval (None: none was)."""
    with engine.connect() as conn:
        value = conn.execute(
            select(OPERATIONS.c.preview).where(OPERATIONS.c.id == operation_id)
        ).scalar_one_or_none()
    return dict(value) if isinstance(value, dict) else None


def note_pipeline_hook(engine: Engine, project_id: int, mr_iid: int, now: datetime) -> None:
    """Records that a pipeline webhook for this MR arrived (the first time only): GitLab's hooks
    reach the bot for it, so its pipeline waits may poll as a fallback only. One UPDATE."""
    with engine.begin() as conn:
        conn.execute(
            update(OPERATIONS)
            .where(
                OPERATIONS.c.project_id == project_id,
                OPERATIONS.c.mr_iid == mr_iid,
                OPERATIONS.c.pipeline_hook_at.is_(None),
            )
            .values(pipeline_hook_at=now)
        )


def bind_maintainer_head(conn: Connection, operation_id: str, head: str) -> None:
    """Records the MR head a Maintainer's `/gitops apply` was given at, in the command's own
    transaction (the operation it just submitted). Written once: no step changes it, so a
    later head is never covered by that Maintainer's authority."""
    conn.execute(
        update(OPERATIONS).where(OPERATIONS.c.id == operation_id).values(maintainer_sha=head)
    )


def set_identity_once(engine: Engine, operation_id: str, identity: dict[str, Any]) -> bool:
    """Fixes an operation's change identity if it has none yet (in-flight operations from before
    identities existed); True when this call set it. A fixed identity never changes."""
    stmt = (
        update(OPERATIONS)
        .where(OPERATIONS.c.id == operation_id, OPERATIONS.c.change_identity.is_(None))
        .values(change_identity=identity)
    )
    with engine.begin() as conn:
        return conn.execute(stmt).rowcount == 1


def take_lease(
    engine: Engine, operation_id: str, seconds: float, now: datetime | None = None
) -> str | None:
    """Claims the operation for one worker's step; the lease token, or None if someone has it."""
    now = now or utcnow()
    token = uuid.uuid4().hex
    stmt = (
        update(OPERATIONS)
        .where(
            OPERATIONS.c.id == operation_id,
            or_(OPERATIONS.c.lease_until.is_(None), OPERATIONS.c.lease_until < now),
        )
        .values(lease_owner=token, lease_until=now + timedelta(seconds=seconds))
    )
    with engine.begin() as conn:
        return token if conn.execute(stmt).rowcount == 1 else None


def release_lease(engine: Engine, operation_id: str, token: str) -> None:
    """Gives the operation back (only if this token still holds it)."""
    stmt = (
        update(OPERATIONS)
        .where(and_(OPERATIONS.c.id == operation_id, OPERATIONS.c.lease_owner == token))
        .values(lease_owner=None, lease_until=None)
    )
    with engine.begin() as conn:
        conn.execute(stmt)


def renew_lease(
    engine: Engine, operation_id: str, token: str, seconds: float, now: datetime | None = None
) -> bool:
    """Pushes the lease on to now + `seconds` if this token still holds it (one UPDATE); False
    when another worker took it (after it had expired), so the caller must stop."""
    now = now or utcnow()
    stmt = (
        update(OPERATIONS)
        .where(and_(OPERATIONS.c.id == operation_id, OPERATIONS.c.lease_owner == token))
        .values(lease_until=now + timedelta(seconds=seconds))
    )
    with engine.begin() as conn:
        return conn.execute(stmt).rowcount == 1
