"""The Repositories API's compare: what `to` brings relative to `from`, from the commits."""

from __future__ import annotations

from . import render, repo
from .errors import not_found
from .model import Commit, Project
from .routing import Ctx, Reply, router

P = "/projects/{project}"


def resolve_ref(ctx: Ctx, project: Project, ref: str) -> Commit | None:
    """A full sha, tag name, branch name or sha prefix (7+ characters) as a commit; None when
    unknown. A name that is both a tag and a branch is the tag, as GitLab resolves a `ref`
    (git's rev-parse order: `refs/tags/<name>` before `refs/heads/<name>`)."""
    commits = ctx.state.commits
    if ref in commits:
        return commits[ref]
    if ref in project.tags:
        return commits[project.tags[ref]]
    if ref in project.branches:
        return commits[project.branches[ref]]
    if len(ref) >= 7:
        return next((c for sha, c in commits.items() if sha.startswith(ref)), None)
    return None


@router.route("GET", P + "/repository/compare")
def compare(ctx: Ctx) -> Reply:
    """GitLab's compare: `straight=false` (default) diffs the merge base of `from` and `to`
    against `to` (what merging `to` brings, `from...to`); `straight=true` diffs `from` itself
    (`from..to`). `commits` are those in `to` and not in `from`, oldest first; `commit` is the
    last of them (null when there are none). An unknown ref is GitLab's `404 Ref Not Found`.
    """
    project = ctx.project()
    source = None
    if ctx.has("from_project_id"):
        source = ctx.state.project(ctx.params["from_project_id"])
    start_text, head_text = str(ctx.require("from")), str(ctx.require("to"))
    start = resolve_ref(ctx, source or project, start_text)
    head = resolve_ref(ctx, project, head_text)
    if start is None or head is None:
        raise not_found("Ref Not Found")
    commits = ctx.state.commits
    straight = ctx.flag("straight")
    base_sha = start.sha if straight else (repo.merge_base(commits, start.sha, head.sha) or "")
    base_tree = commits[base_sha].tree if base_sha else {}
    listed = repo.commits_between(commits, start.sha, head.sha)
    rendered = [render.commit(ctx.state, project, c) for c in listed]
    url = f"{ctx.state.project_url(project)}/-/compare/{start_text}...{head_text}"
    return Reply(
        200,
        {
            "commit": rendered[-1] if rendered else None,
            "commits": rendered,
            "diffs": repo.diff_entries(base_tree, head.tree),
            "compare_timeout": False,
            "compare_same_ref": start.sha == head.sha,
            "web_url": url + ("?straight=true" if straight else ""),
        },
    )
