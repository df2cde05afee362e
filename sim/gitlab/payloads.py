"""The pieces of webhook payloads: our values for the documented hashes, and fill-ins per kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import flow
from .model import Deployment, MergeRequest, Note, Pipeline, Project, User

if TYPE_CHECKING:
    from .state import State

JSON = dict[str, Any]
#: Formats a time the way one payload kind writes it.
Stamp = Callable[[datetime | None], str | None]
STATE_IDS = {"opened": 1, "closed": 2, "merged": 3, "locked": 4}


def overlay(base: Mapping[str, Any], ours: Mapping[str, Any]) -> JSON:
    """The base's keys, with our value wherever we have one."""
    return {key: ours.get(key, value) for key, value in base.items()}


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def utc(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else None


def project(state: State, p: Project) -> JSON:
    url = state.project_url(p)
    ssh = f"git@{state.web_url.split('://', 1)[-1]}:{p.path}.git"
    return {
        "id": p.id,
        "name": p.name,
        "description": "",
        "web_url": url,
        "avatar_url": None,
        "git_ssh_url": ssh,
        "git_http_url": f"{url}.git",
        "namespace": p.namespace,
        "visibility_level": 10,
        "path_with_namespace": p.path,
        "default_branch": p.default_branch,
        # Project#hook_attrs: the setting as stored (the documented examples show "" unset)
        "ci_config_path": p.ci_config_path or "",
        "homepage": url,
        "url": ssh,
        "ssh_url": ssh,
        "http_url": f"{url}.git",
    }


def user(u: User) -> JSON:
    return {
        "id": u.id,
        "name": u.name,
        "username": u.username,
        "avatar_url": None,
        "email": "[REDACTED]",
    }


def _label(state: State, p: Project, title: str) -> JSON:
    when = iso(p.created_at)
    return {
        "id": state.label_id(p, title),
        "title": title,
        "color": "#428bca",
        "project_id": p.id,
        "created_at": when,
        "updated_at": when,
        "template": False,
        "description": None,
        "type": "ProjectLabel",
        "group_id": None,
    }


def _last_commit(state: State, p: Project, sha: str) -> JSON:
    commit = state.commits[sha]
    author = state.users[commit.author_id]
    return {
        "id": sha,
        "message": commit.message,
        "title": commit.title,
        "timestamp": iso(commit.created_at),
        "url": f"{state.project_url(p)}/-/commit/{sha}",
        "author": {"name": author.name, "email": f"{author.username}@example.com"},
    }


def _mr_fields(state: State, p: Project, mr: MergeRequest, stamp: Stamp) -> JSON:
    """Our values for the MR hash in MR, note and pipeline hooks."""
    source = state.projects[mr.source_project_id]
    return {
        "id": mr.id,
        "iid": mr.iid,
        "target_branch": mr.target_branch,
        "source_branch": mr.source_branch,
        "source_project_id": mr.source_project_id,
        "target_project_id": p.id,
        "author_id": mr.author_id,
        "assignee_ids": [],
        "assignee_id": None,
        "reviewer_ids": [],
        "title": mr.title,
        "description": mr.description,
        "created_at": stamp(mr.created_at),
        "updated_at": stamp(mr.updated_at),
        "last_edited_at": None,
        "last_edited_by_id": None,
        "milestone_id": None,
        "state_id": STATE_IDS[mr.state],
        "state": mr.state,
        "work_in_progress": mr.draft,
        "draft": mr.draft,
        "first_contribution": False,
        "merge_status": state.merge_status(p, mr),
        "detailed_merge_status": state.detailed_status(p, mr),
        "prepared_at": stamp(mr.created_at),
        "total_time_spent": 0,
        "time_change": 0,
        "human_total_time_spent": None,
        "human_time_change": None,
        "human_time_estimate": None,
        "url": state.mr_url(p, mr),
        "source": project(state, source),
        "target": project(state, p),
        "last_commit": _last_commit(state, source, mr.sha),
        "labels": [_label(state, p, t) for t in mr.labels],
        "position": 0,
    }


def _mr_hash(state: State, p: Project, mr: MergeRequest, base: JSON, stamp: Stamp) -> JSON:
    ours = _mr_fields(state, p, mr, stamp)
    out = overlay(base, ours)
    for nested in ("source", "target"):
        if nested in base:
            out[nested] = overlay(base[nested], ours[nested])
    out.pop("assignee", None)
    return out


def fill_mr(
    state: State,
    payload: JSON,
    p: Project,
    mr: MergeRequest,
    action: str | None,
    changes: Mapping[str, Any] | None,
    oldrev: str | None,
) -> None:
    attrs = _mr_hash(state, p, mr, payload["object_attributes"], iso)
    attrs.update(action=action or "update", merge_commit_sha=mr.merge_commit_sha)
    if oldrev:
        attrs["oldrev"] = oldrev
    payload["object_attributes"] = attrs
    payload["labels"] = attrs["labels"]
    payload["changes"] = dict(changes or {})
    payload["assignees"] = []
    payload["reviewers"] = []


def fill_note(
    state: State, payload: JSON, p: Project, mr: MergeRequest, note: Note, action: str | None
) -> None:
    ours = {
        "id": note.id,
        "note": note.body,
        "noteable_type": "MergeRequest",
        "author_id": note.author_id,
        "created_at": utc(note.created_at),
        "updated_at": utc(note.updated_at),
        "project_id": p.id,
        "commit_id": "",
        "noteable_id": mr.id,
        "system": note.system,
        "action": action or "create",
        "url": f"{state.mr_url(p, mr)}#note_{note.id}",
    }
    payload["object_attributes"] = overlay(payload["object_attributes"], ours)
    payload["merge_request"] = _mr_hash(state, p, mr, payload["merge_request"], utc)


def fill_pipeline(
    state: State, payload: JSON, p: Project, pl: Pipeline, mr: MergeRequest | None
) -> None:
    duration = (
        int((pl.finished_at - pl.started_at).total_seconds())
        if pl.finished_at and pl.started_at
        else None
    )
    ours = {
        "id": pl.id,
        "iid": pl.iid,
        "name": f"Pipeline for merge request !{mr.iid}" if mr else f"Pipeline for {pl.ref}",
        # DataBuilder::Pipeline#hook_attrs sends `source_ref`: an MR pipeline's source branch
        # (its `refs/merge-requests/:iid/...` ref only in the API), a branch pipeline's branch;
        # `sha` is what it ran on: a merged results pipeline's merge-ref commit
        # (GitLab: lib/gitlab/data_builder/pipeline.rb, app/models/ci/pipeline.rb)
        "ref": flow.source_ref(p, pl),
        "sha": pl.sha,
        "before_sha": pl.before_sha,
        "source": pl.source,
        "status": pl.status,
        "stages": ["test"],
        "created_at": utc(pl.created_at),
        "finished_at": utc(pl.finished_at),
        "duration": duration,
        "variables": [],
        "url": f"{state.project_url(p)}/-/pipelines/{pl.id}",
    }
    payload["object_attributes"] = overlay(payload["object_attributes"], ours)
    payload["object_attributes"]["detailed_status"] = pl.status
    base_mr = payload["merge_request"]
    payload["merge_request"] = _mr_hash(state, p, mr, base_mr, utc) if mr else None
    payload["commit"] = overlay(payload["commit"], _last_commit(state, p, pl.sha))
    job = payload["builds"][1]
    job.update(id=pl.id * 10, stage="test", name="test", status=pl.status)
    job.update(created_at=utc(pl.created_at), started_at=utc(pl.started_at))
    job.update(finished_at=utc(pl.finished_at), user=payload["user"])
    payload["builds"] = [job]
    payload.pop("source_pipeline", None)


def fill_deployment(state: State, payload: JSON, p: Project, d: Deployment) -> None:
    url = state.project_url(p)
    commit = state.commits.get(d.sha)
    when = d.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S %z")
    tier = d.environment if d.environment in {"production", "staging"} else "other"
    ours = {
        "status": d.status,
        "status_changed_at": when,
        "deployment_id": d.id,
        "deployable_id": d.deployable_id,
        "deployable_url": f"{url}/-/jobs/{d.deployable_id}",
        "environment": d.environment,
        "environment_tier": tier,
        "environment_slug": d.environment.lower().replace("/", "-"),
        "environment_external_url": None,
        "short_sha": d.sha[:8],
        "user_url": f"{state.web_url}/{state.users[d.user_id].username}",
        "commit_url": f"{url}/-/commit/{d.sha}",
        "commit_title": commit.title if commit else "",
    }
    payload.update(overlay(payload, ours))
    # DataBuilder::Deployment ends with the deployment's `ref` (a branch or tag name), absent
    # from the documented example but in the builder (lib/gitlab/data_builder/deployment.rb;
    # clients model it since 2022, xanzy/go-gitlab#1565). No full sha: `short_sha` and
    # `commit_url` only.
    payload["ref"] = d.ref
