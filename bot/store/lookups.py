"""Which operation an event is about: the owner of an MR or of a merge commit, an operation's refs.

The `conn` functions read inside a connection the caller already holds; the `engine` ones open
their own (one connection for all their reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection, Engine

from bot.errors import NotOwner, UnknownOperation
from bot.store.fire import CurrentState, load_current
from bot.store.models import BINDINGS, OPERATIONS

_owned = OPERATIONS.join(BINDINGS, BINDINGS.c.operation_id == OPERATIONS.c.id)


def owner_of_mr(conn: Connection, project: str | int, mr_iid: int) -> str | None:
    """The operation that owns its binding and this MR (project by numeric id or by path)."""
    project_text = str(project)
    match = [OPERATIONS.c.project == project_text]
    if project_text.isdigit():
        match.append(OPERATIONS.c.project_id == int(project_text))
    query = (
        select(OPERATIONS.c.id)
        .select_from(_owned)
        .where(OPERATIONS.c.mr_iid == mr_iid, or_(*match))
        .order_by(OPERATIONS.c.created_at.desc())
        .limit(1)
    )
    found: str | None = conn.execute(query).scalar_one_or_none()
    return found


def owner_of_merge_commit(conn: Connection, project_id: int, sha: str) -> str | None:
    """The owning operation whose merge commit is exactly this SHA."""
    query = (
        select(OPERATIONS.c.id)
        .select_from(_owned)
        .where(OPERATIONS.c.project_id == project_id, OPERATIONS.c.merge_commit_sha == sha)
        .limit(1)
    )
    found: str | None = conn.execute(query).scalar_one_or_none()
    return found


@dataclass(frozen=True, slots=True)
class OperationRef:
    """What a callback naming an operation must agree with: its project, MR and merge commit."""

    id: str
    project: str
    project_id: int | None
    mr_iid: int | None
    merge_commit_sha: str | None

    def names_project(self, project: str) -> bool:
        """True when `project` is this operation's path (any case) or its numeric id."""
        return project.casefold() == self.project.casefold() or (
            self.project_id is not None and project == str(self.project_id)
        )


def operation_ref(conn: Connection, operation_id: str) -> OperationRef | None:
    """The operation's project, MR and merge commit (None when there is no such operation)."""
    query = select(
        OPERATIONS.c.id,
        OPERATIONS.c.project,
        OPERATIONS.c.project_id,
        OPERATIONS.c.mr_iid,
        OPERATIONS.c.merge_commit_sha,
    ).where(OPERATIONS.c.id == operation_id)
    row = conn.execute(query).one_or_none()
    return None if row is None else OperationRef(*row)


# -- in their own connection ----------------------------------------------------------------------


def mr_owner(engine: Engine, project: str | int, mr_iid: int) -> str | None:
    """owner_of_mr() in its own connection."""
    with engine.connect() as conn:
        return owner_of_mr(conn, project, mr_iid)


def merge_commit_owner(engine: Engine, project_id: int, sha: str) -> str | None:
    """owner_of_merge_commit() in its own connection."""
    with engine.connect() as conn:
        return owner_of_merge_commit(conn, project_id, sha)


def callback_target(
    engine: Engine, operation_id: str | None, project: str, mr_iid: int
) -> tuple[str | None, OperationRef | None]:
    """The operation a deploy callback is about (the one it names, else the MR's owner) and
    its refs (None when there is no such operation), in one connection."""
    with engine.connect() as conn:
        if operation_id is None:
            operation_id = owner_of_mr(conn, project, mr_iid)
        ref = operation_ref(conn, operation_id) if operation_id is not None else None
    return operation_id, ref


@dataclass(frozen=True, slots=True)
class MrOwner:
    """The MR's owning operation, one of its columns, and what fire() needs to move it."""

    operation_id: str
    value: Any
    #: None when load_current() refused the operation (`lost` names the error: it was replaced
    #: or removed between the reads)
    current: CurrentState | None
    lost: str | None = None


#: The operation columns mr_owner_with() reads along with the owner.
_OWNER_COLUMNS = frozenset({"head_sha", "verified_sha"})


def mr_owner_with(engine: Engine, project_id: int, iid: int, column: str) -> MrOwner | None:
    """The MR's owner, its `column` and its current state, in one connection; None: nobody."""
    if column not in _OWNER_COLUMNS:
        raise ValueError(f"mr_owner_with() does not read {column}")
    with engine.connect() as conn:
        op_id = owner_of_mr(conn, project_id, iid)
        if op_id is None:
            return None
        value = conn.execute(
            select(OPERATIONS.c[column]).where(OPERATIONS.c.id == op_id)
        ).scalar_one_or_none()
        try:
            return MrOwner(op_id, value, load_current(conn, op_id))
        except (UnknownOperation, NotOwner) as exc:
            return MrOwner(op_id, value, None, type(exc).__name__)


def verified_head(engine: Engine, operation_id: str) -> str | None:
    """The MR head the operation last checked against its approval (None: none yet)."""
    with engine.connect() as conn:
        return conn.execute(
            select(OPERATIONS.c.verified_sha).where(OPERATIONS.c.id == operation_id)
        ).scalar_one_or_none()


def read_current(engine: Engine, operation_id: str) -> CurrentState:
    """load_current() in its own connection (raises UnknownOperation, NotOwner)."""
    with engine.connect() as conn:
        return load_current(conn, operation_id)


def change_identity(engine: Engine, operation_id: str) -> Any:
    """The operation's stored change identity (None when it has none, or there is no such id)."""
    with engine.connect() as conn:
        return conn.execute(
            select(OPERATIONS.c.change_identity).where(OPERATIONS.c.id == operation_id)
        ).scalar_one_or_none()
