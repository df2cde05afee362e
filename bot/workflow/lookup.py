"""Finding the operation an event is about: by id, by MR, by merge commit."""

from __future__ import annotations

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
