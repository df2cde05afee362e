"""Routes for tags (lib/api/tags.rb, app/services/tags/create_service.rb): create one at a ref
(409 when it exists, 400 for a target that resolves to nothing), read one. A tag named like a branch
shadows it wherever GitLab resolves a `ref` by name (routes_compare.resolve_ref)."""

from __future__ import annotations

from . import render
from .errors import ApiError, bad_request, forbidden, not_found
from .model import Access, Project
from .routes_compare import resolve_ref
from .routing import Ctx, Reply, router

P = "/projects/{project}"


def tag_json(ctx: Ctx, project: Project, name: str) -> dict[str, object]:
    """GitLab's tag entity (lib/api/entities/tag.rb): name, target, commit, message, protected."""
    sha = project.tags[name]
    return {
        "name": name,
        "message": None,
        "target": sha,
        "commit": render.commit(ctx.state, project, ctx.state.commits[sha]),
        "release": None,
        "protected": False,
        "created_at": None,
    }


@router.route("POST", P + "/repository/tags")
def create_tag(ctx: Ctx) -> Reply:
    """Creates a lightweight tag `tag_name` at `ref` (Developer; 409 when it exists)."""
    project = ctx.project()
    if ctx.state.access(project, ctx.user.id) < Access.DEVELOPER:
        raise forbidden()
    name = str(ctx.require("tag_name"))
    ref = str(ctx.require("ref"))
    if name in project.tags:
        raise ApiError(409, f"Tag {name} already exists")
    commit = resolve_ref(ctx, project, ref)
    if commit is None:
        raise bad_request(f"Target {ref} is invalid")
    project.tags[name] = commit.sha
    return Reply(201, tag_json(ctx, project, name))


@router.route("GET", P + "/repository/tags/{tag_name}")
def get_tag(ctx: Ctx) -> Reply:
    """One tag; `404 Tag Not Found`."""
    project = ctx.project()
    name = ctx.args["tag_name"]
    if name not in project.tags:
        raise not_found("Tag Not Found")
    return Reply(200, tag_json(ctx, project, name))
