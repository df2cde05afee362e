"""Reads of remote state: each one GET (a page of a list), each translated into our errors."""

from __future__ import annotations

from urllib.parse import quote

from bot.core.pipelines import needs_parents
from bot.gitlab.calls import get_json, get_list
from bot.gitlab.client import Account, Project
from bot.gitlab.errors import Forbidden, NotFound
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


def commit_parents(project: Project, sha: str) -> tuple[str, ...]:
    """The parents of a commit, in order (one GET of /repository/commits/:sha; a merge-ref
    commit's are the target's head, then the MR's head)."""
    commit = get_json(
        project.gl,
        f"{project.path}/repository/commits/{quote(sha, safe='')}",
        what=f"read commit {sha[:12]}",
    )
    parents = commit.get("parent_ids")
    return (
        tuple(p for p in parents if isinstance(p, str) and p) if isinstance(parents, list) else ()
    )


def head_pipeline_parents(project: Project, mr: MrView) -> tuple[str, ...]:
    """The parents of the commit a merged results head pipeline ran on, when that is not the
    head (one GET); () when no read can change the judgement (the pipeline ran on the head, or
    on another commit that is no merge ref: an older head's pipeline, not attached anew yet)."""
    if not mr.merged_results_pipeline or not needs_parents(mr.head_pipeline_sha, mr.sha):
        return ()
    assert mr.head_pipeline_sha is not None
    return commit_parents(project, mr.head_pipeline_sha)


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


def server_version(account: Account) -> str:
    """GitLab's version as GET /version answers it for this account's token (one GET)."""
    data = get_json(account.gl, "/version", what=f"{account.label}: read the GitLab version")
    version = data.get("version")
    return version if isinstance(version, str) else "unknown"


def token_scopes(account: Account) -> tuple[str, ...] | None:
    """The scopes of this account's personal access token (GET /personal_access_tokens/self,
    GitLab 15.5+); None when GitLab does not show them (older, or not a personal token)."""
    try:
        data = get_json(
            account.gl, "/personal_access_tokens/self", what=f"{account.label}: read token scopes"
        )
    except (NotFound, Forbidden):
        return None
    scopes = data.get("scopes")
    if not isinstance(scopes, list):
        return None
    return tuple(sorted(str(scope) for scope in scopes))


def default_branch(project: Project) -> str | None:
    """The project's default branch (one GET); None for an empty repository."""
    data = get_json(project.gl, project.path, what="read the project")
    branch = data.get("default_branch")
    return branch if isinstance(branch, str) and branch else None
