"""Finding the operation an event is about: by id, by MR, by merge commit."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection

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
