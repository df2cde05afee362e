"""Merge request routes: list, create, read, update, approvals, merge, rebase, pipelines, diffs."""

from __future__ import annotations

from typing import Any

from . import mr_ops, render, render_mr, repo
from .errors import ApiError, not_found
from .model import PIPELINE_STATUSES
from .routing import Ctx, Reply, router

P = "/projects/{project}"
MR = P + "/merge_requests/{iid:int}"


@router.route("GET", P + "/merge_requests")
def list_mrs(ctx: Ctx) -> Reply:
    """MRs newest first, filtered by state, branches, labels and author."""
    project = ctx.project()
    state = ctx.text("state") or "all"
    labels = ctx.names("labels") or []
    found = [
        mr
        for mr in sorted(project.mrs.values(), key=lambda m: -m.iid)
        if state in {"all", mr.state}
        and ctx.text("source_branch") in {None, mr.source_branch}
        and ctx.text("target_branch") in {None, mr.target_branch}
        and all(label in mr.labels for label in labels)
        and ctx.text("author_username") in {None, ctx.state.users[mr.author_id].username}
    ]
    return ctx.paginate(
        [render_mr.merge_request(ctx.state, project, m, detail=False) for m in found]
    )


@router.route("POST", P + "/merge_requests")
def create_mr(ctx: Ctx) -> Reply:
    """Opens an MR as the caller."""
    project = ctx.project()
    source_id = ctx.text("source_project_id")
    mr = mr_ops.open_mr(
        ctx.state,
        project,
        ctx.user,
        source_branch=str(ctx.require("source_branch")),
        target_branch=str(ctx.require("target_branch")),
        title=str(ctx.require("title")),
        description=ctx.text("description") or "",
        labels=ctx.names("labels") or [],
        remove_source_branch=ctx.flag("remove_source_branch"),
        source_project=ctx.state.project(source_id) if source_id else None,
    )
    return Reply(201, render_mr.merge_request(ctx.state, project, mr, viewer=ctx.user))


@router.route("GET", MR)
def get_mr(ctx: Ctx) -> Reply:
    """One MR; each read advances a queued rebase's read counter."""
    project = ctx.project()
    mr = ctx.mr(project)
    mr_ops.count_read(ctx.state, project, mr)
    out = render_mr.merge_request(ctx.state, project, mr, viewer=ctx.user)
    if ctx.flag("include_rebase_in_progress"):
        out["rebase_in_progress"] = mr.rebase_in_progress
    if ctx.flag("include_diverged_commits_count"):
        target = project.branches.get(mr.target_branch)
        behind = repo.ancestors(ctx.state.commits, target) if target else set()
        out["diverged_commits_count"] = len(behind - repo.ancestors(ctx.state.commits, mr.sha))
    return Reply(200, out)


@router.route("PUT", MR)
def update_mr(ctx: Ctx) -> Reply:
    """Edits labels, title, description or state (close/reopen)."""
    project = ctx.project()
    mr = ctx.mr(project)
    params: dict[str, Any] = {
        "labels": ctx.names("labels"),
        "add_labels": ctx.names("add_labels"),
        "remove_labels": ctx.names("remove_labels"),
        "title": ctx.text("title"),
        "description": ctx.text("description"),
        "target_branch": ctx.text("target_branch"),
        "state_event": ctx.text("state_event"),
        "remove_source_branch": (
            ctx.flag("remove_source_branch") if ctx.has("remove_source_branch") else None
        ),
    }
    mr_ops.update_mr(ctx.state, project, mr, ctx.user, params)
    return Reply(200, render_mr.merge_request(ctx.state, project, mr, viewer=ctx.user))


@router.route("GET", MR + "/approvals")
def get_approvals(ctx: Ctx) -> Reply:
    """Who approved, and whether the MR is approved."""
    project = ctx.project()
    return Reply(200, render_mr.approvals(ctx.state, project, ctx.mr(project), ctx.user))


@router.route("POST", MR + "/approve")
def approve(ctx: Ctx) -> Reply:
    """Approves as the caller (optionally pinned to `sha`, confirming `check_items`)."""
    project = ctx.project()
    mr = ctx.mr(project)
    mr_ops.approve(
        ctx.state,
        project,
        mr,
        ctx.user,
        sha=ctx.text("sha"),
        check_items=ctx.params.get("check_items"),
    )
    return Reply(201, render_mr.approvals(ctx.state, project, mr, ctx.user))


@router.route("POST", MR + "/unapprove")
def unapprove(ctx: Ctx) -> Reply:
    """Withdraws the caller's approval."""
    project = ctx.project()
    mr = ctx.mr(project)
    mr_ops.unapprove(ctx.state, project, mr, ctx.user)
    return Reply(201, render_mr.approvals(ctx.state, project, mr, ctx.user))


@router.route("PUT", MR + "/merge")
def merge(ctx: Ctx) -> Reply:
    """Merges now, or answers why not (405/406/409/422)."""
    project = ctx.project()
    mr = ctx.mr(project)
    remove = (
        ctx.flag("should_remove_source_branch") if ctx.has("should_remove_source_branch") else None
    )
    mr_ops.merge(
        ctx.state,
        project,
        mr,
        ctx.user,
        sha=ctx.text("sha"),
        remove_source_branch=remove,
        message=ctx.text("merge_commit_message"),
    )
    return Reply(200, render_mr.merge_request(ctx.state, project, mr, viewer=ctx.user))


@router.route("PUT", MR + "/rebase")
def rebase(ctx: Ctx) -> Reply:
    """Queues a rebase: 202 means only that."""
    project = ctx.project()
    mr_ops.start_rebase(ctx.state, project, ctx.mr(project), ctx.user)
    return Reply(202, {"rebase_in_progress": True})


@router.route("GET", MR + "/pipelines")
def mr_pipelines(ctx: Ctx) -> Reply:
    """The MR's pipelines, newest first."""
    project = ctx.project()
    found = ctx.state.mr_pipelines(project, ctx.mr(project))
    return ctx.paginate([render.pipeline(ctx.state, project, p) for p in found])


@router.route("GET", MR + "/diffs")
def mr_diffs(ctx: Ctx) -> Reply:
    """The MR's changed files (GitLab 15.7+), from the double's commits: what its head changes
    since its merge base with the target (as when it merged, once merged), as GitLab's diff
    entries (exact renames as one entry, unified diff text)."""
    project = ctx.project()
    mr = ctx.mr(project)
    commits = ctx.state.commits
    base_sha = mr.diff_base_sha
    if base_sha is None and mr.merge_commit_sha is not None:
        base_sha = commits[mr.merge_commit_sha].parents[0]
    elif base_sha is None:
        target = project.branches.get(mr.target_branch)
        base_sha = repo.merge_base(commits, target, mr.sha) if target else None
    base = commits[base_sha].tree if base_sha else {}
    return ctx.paginate(repo.diff_entries(base, commits[mr.sha].tree))


@router.route("GET", P + "/pipelines")
def list_pipelines(ctx: Ctx) -> Reply:
    """The project's pipelines newest first, filtered by sha, ref and status."""
    project = ctx.project()
    status = ctx.text("status")
    if status is not None and status not in PIPELINE_STATUSES:
        raise ApiError(400, None, error="status does not have a valid value")
    found = [
        p
        for p in sorted(project.pipelines.values(), key=lambda p: -p.id)
        if ctx.text("sha") in {None, p.sha}
        and ctx.text("ref") in {None, p.ref}
        and status in {None, p.status}
    ]
    return ctx.paginate([render.pipeline(ctx.state, project, p) for p in found])


@router.route("GET", P + "/pipelines/{pipeline_id:int}")
def get_pipeline(ctx: Ctx) -> Reply:
    """One pipeline."""
    project = ctx.project()
    pipeline = project.pipelines.get(int(ctx.args["pipeline_id"]))
    if pipeline is None:
        raise not_found("Not found")
    return Reply(200, render.pipeline(ctx.state, project, pipeline, detail=True))
