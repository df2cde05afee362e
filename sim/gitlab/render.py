"""GitLab-shaped JSON for the double's objects (the REST API's field names and types)."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import protection, repo
from .model import Commit, Hook, Pipeline, Project, User

if TYPE_CHECKING:
    from .state import State

JSON = dict[str, Any]


def ts(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with milliseconds and a `Z`, as the API writes times."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def user(state: State, u: User) -> JSON:
    """The basic user object embedded everywhere."""
    return {
        "id": u.id,
        "username": u.username,
        "name": u.name,
        "state": "active",
        "locked": False,
        "avatar_url": None,
        "web_url": f"{state.web_url}/{u.username}",
    }


def member(state: State, u: User, level: int) -> JSON:
    """A project member: a user plus its access level."""
    return {
        **user(state, u),
        "access_level": level,
        "expires_at": None,
        "membership_state": "active",
    }


def project(state: State, p: Project) -> JSON:
    """GET /projects/:id."""
    url = state.project_url(p)
    host = state.web_url.split("://", 1)[-1]
    out: JSON = {
        "id": p.id,
        "name": p.name,
        "name_with_namespace": p.path.replace("/", " / "),
        "path": p.name,
        "path_with_namespace": p.path,
        "description": "",
        "default_branch": p.default_branch,
        "visibility": p.visibility,
        "web_url": url,
        "http_url_to_repo": f"{url}.git",
        "ssh_url_to_repo": f"git@{host}:{p.path}.git",
        "namespace": {
            "id": p.id * 10,
            "name": p.namespace,
            "path": p.namespace,
            "kind": "group",
            "full_path": p.namespace,
        },
        "created_at": ts(p.created_at),
        "archived": False,
        "empty_repo": not p.branches,
        "merge_method": p.merge_method,
        "only_allow_merge_if_pipeline_succeeds": p.pipeline_must_succeed,
        "approvals_before_merge": p.required_approvals,
        # shown to whoever may read the code (lib/api/entities/project.rb); null when unset
        "ci_config_path": p.ci_config_path,
    }
    if state.edition == "premium":
        # exposed only with the licence (Premium, Ultimate); absent on Free and CE. GitLab's
        # merge_trains_enabled is true only with merged results pipelines on as well
        out["merge_pipelines_enabled"] = p.merge_pipelines_enabled
        out["merge_trains_enabled"] = p.merge_pipelines_enabled and p.merge_trains_enabled
    return out


def commit(state: State, p: Project, c: Commit) -> JSON:
    """A commit as the Commits API answers it."""
    author = state.users[c.author_id]
    return {
        "id": c.sha,
        "short_id": c.sha[:8],
        "title": c.title,
        "message": c.message,
        "author_name": author.name,
        "author_email": f"{author.username}@example.com",
        "authored_date": ts(c.created_at),
        "committer_name": author.name,
        "committer_email": f"{author.username}@example.com",
        "committed_date": ts(c.created_at),
        "created_at": ts(c.created_at),
        "parent_ids": list(c.parents),
        "web_url": f"{state.project_url(p)}/-/commit/{c.sha}",
        "trailers": {},
        "extended_trailers": {},
    }


def branch(state: State, p: Project, name: str) -> JSON:
    """A branch with its head commit."""
    return {
        "name": name,
        "merged": False,
        "protected": bool(protection.rules_for(p, name)),
        "default": name == p.default_branch,
        "developers_can_push": False,
        "developers_can_merge": False,
        "can_push": True,
        "web_url": f"{state.project_url(p)}/-/tree/{name}",
        "commit": commit(state, p, state.commits[p.branches[name]]),
    }


def file(state: State, c: Commit, path: str, ref: str) -> JSON:
    """GET /repository/files/:path (content base64-encoded)."""
    data = c.tree[path].encode()
    return {
        "file_name": path.rsplit("/", 1)[-1],
        "file_path": path,
        "size": len(data),
        "encoding": "base64",
        "content": base64.b64encode(data).decode(),
        "content_sha256": hashlib.sha256(data).hexdigest(),
        "ref": ref,
        "blob_id": repo.blob_id(c.tree[path]),
        "commit_id": c.sha,
        "last_commit_id": repo.last_commit_for_path(state.commits, c.sha, path),
        "execute_filemode": False,
    }


def file_headers(state: State, c: Commit, path: str, ref: str) -> dict[str, str]:
    """The `X-Gitlab-*` headers GitLab sends with a file (HEAD, GET and raw): every field of the
    file answer but its content, as documented (`X-Gitlab-Content-Sha256`, `X-Gitlab-Size`, ...).
    """
    fields = file(state, c, path, ref)
    del fields["content"]
    return {
        "X-Gitlab-" + "-".join(part.capitalize() for part in name.split("_")): (
            str(value).lower() if isinstance(value, bool) else str(value)
        )
        for name, value in fields.items()
    }


def pipeline(state: State, p: Project, pl: Pipeline, *, detail: bool = False) -> JSON:
    """A pipeline: the list shape, or the single-pipeline shape with `detail`."""
    out: JSON = {
        "id": pl.id,
        "iid": pl.iid,
        "project_id": pl.project_id,
        "sha": pl.sha,
        "ref": pl.ref,
        "status": pl.status,
        "source": pl.source,
        "created_at": ts(pl.created_at),
        "updated_at": ts(pl.updated_at),
        "web_url": f"{state.project_url(p)}/-/pipelines/{pl.id}",
    }
    if detail:
        duration = (
            int((pl.finished_at - pl.started_at).total_seconds())
            if pl.finished_at and pl.started_at
            else None
        )
        out.update(
            before_sha=pl.before_sha,
            tag=False,
            yaml_errors=None,
            user=user(state, state.users[pl.user_id]),
            started_at=ts(pl.started_at),
            finished_at=ts(pl.finished_at),
            committed_at=None,
            duration=duration,
            queued_duration=None,
            coverage=None,
            detailed_status={"icon": f"status_{pl.status}", "text": pl.status, "group": pl.status},
        )
    return out


def hook(h: Hook) -> JSON:
    """A project hook (GitLab never answers with the token)."""
    return {
        "id": h.id,
        "url": h.url,
        "name": "",
        "description": "",
        "project_id": h.project_id,
        "created_at": ts(h.created_at),
        **h.flags,
        "enable_ssl_verification": h.enable_ssl_verification,
        "alert_status": h.alert_status,
        "disabled_until": ts(h.disabled_until),
        "push_events_branch_filter": None,
        "branch_filter_strategy": "wildcard",
        "repository_update_events": False,
        "custom_webhook_template": None,
        "url_variables": [],
        "custom_headers": [],
    }
