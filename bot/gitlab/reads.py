"""Reads of remote state: each one GET (a page of a list), each translated into our errors."""

from __future__ import annotations

from bot.gitlab.calls import get_json, get_list
from bot.gitlab.client import Project
from bot.gitlab.errors import NotFound
from bot.gitlab.views import MrView, PipelineView


def read_mr(project: Project, iid: int) -> MrView:
    """The merge request now, including whether a rebase is running (one GET)."""
    data = get_json(
        project.gl,
        project.mr_path(iid),
        what=f"read MR !{iid}",
        query={"include_rebase_in_progress": "true"},
    )
    return MrView.from_json(data)


def mr_pipelines(project: Project, iid: int, *, limit: int = 20) -> list[PipelineView]:
    """The MR's pipelines, newest first (one GET; at most `limit` of them)."""
    rows = get_list(
        project.gl,
        f"{project.mr_path(iid)}/pipelines",
        what=f"list pipelines of MR !{iid}",
        limit=limit,
    )
    return [PipelineView.from_json(row) for row in rows]


def approved_by(project: Project, iid: int) -> set[str]:
    """The usernames that have approved the MR now (one GET)."""
    data = get_json(
        project.gl, f"{project.mr_path(iid)}/approvals", what=f"read approvals of !{iid}"
    )
    names: set[str] = set()
    for entry in data.get("approved_by") or []:
        user = entry.get("user") if isinstance(entry, dict) else None
        if isinstance(user, dict) and isinstance(user.get("username"), str):
            names.add(user["username"])
    return names


def member_access_level(project: Project, user_id: int) -> int | None:
    """The user's effective access level (inherited included); None when not a member.

    Any other failure raises: callers checking rights must deny when the lookup fails.
    """
    try:
        data = get_json(
            project.gl,
            f"{project.path}/members/all/{int(user_id)}",
            what=f"read membership of user {int(user_id)}",
        )
    except NotFound:
        return None
    level = data.get("access_level")
    return level if isinstance(level, int) and not isinstance(level, bool) else None
