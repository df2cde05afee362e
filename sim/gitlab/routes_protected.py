"""The protected branches API: list, get (names may be wildcards), protect, update, unprotect.

Premium (the default) takes `allowed_to_push`/`allowed_to_merge`/`allowed_to_unprotect` lists of
`{user_id}`, `{group_id}`, `{access_level}` (and `{deploy_key_id}` for push); PATCH also takes
`{id, ...}` to change an entry and `{id, _destroy: true}` to remove one. CE declares none of
these parameters, so it ignores them: a POST gets only the role levels (40 by default) and a
PATCH changes only `allow_force_push`. Send the lists as a JSON body.
"""

from __future__ import annotations

from typing import Any

from . import protection
from .errors import ApiError, bad_request, forbidden, not_found
from .model import Access, AccessEntry, Project, ProtectedBranch
from .routing import Ctx, Reply, router

P = "/projects/{project}"
KINDS = ("push", "merge", "unprotect")
NOT_ACCESSIBLE = "Cannot add users or groups unless they have access to the project"


def _maintainer(ctx: Ctx, project: Project) -> None:
    if ctx.state.access(project, ctx.user.id) < Access.MAINTAINER:
        raise forbidden()


def _rule(ctx: Ctx, project: Project) -> ProtectedBranch:
    rule = project.protected_branches.get(ctx.args["name"])
    if rule is None:
        raise not_found("Not found")
    return rule


def _int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise bad_request(f"{name} is invalid") from None


def _level(value: Any, name: str) -> int:
    level = _int(value, name)
    if level not in protection.ALLOWED_LEVELS:
        raise ApiError(400, None, error=f"{name} does not have a valid value")
    return level


def _fill(ctx: Ctx, project: Project, entry: AccessEntry, item: dict[str, Any], kind: str) -> None:
    """Sets one entry from a `{user_id}`/`{group_id}`/`{deploy_key_id}`/`{access_level}` hash."""
    name = f"allowed_to_{kind}"
    if item.get("user_id") is not None:
        user_id = _int(item["user_id"], f"{name}[user_id]")
        if ctx.state.access(project, user_id) <= Access.NONE:
            raise ApiError(422, [NOT_ACCESSIBLE])
        entry.user_id, entry.access_level, entry.group_id = user_id, None, None
    elif item.get("group_id") is not None:
        raise ApiError(422, [NOT_ACCESSIBLE])  # the double has no groups to share with
    elif item.get("deploy_key_id") is not None and kind == "push":
        raise ApiError(422, ["Deploy key is not enabled for this project"])
    elif item.get("access_level") is not None:
        level = _level(item["access_level"], f"{name}[access_level]")
        entry.access_level, entry.user_id, entry.group_id = level, None, None
    else:
        raise bad_request(f"{name} is invalid")


def _items(ctx: Ctx, kind: str) -> list[dict[str, Any]]:
    value = ctx.params.get(f"allowed_to_{kind}")
    if value is None or ctx.state.edition != "premium":
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise bad_request(f"allowed_to_{kind} is invalid")
    return value


def _add(
    ctx: Ctx, project: Project, entries: list[AccessEntry], item: dict[str, Any], kind: str
) -> None:
    """Appends a new entry; GitLab's 422 when the same role or user is already listed."""
    entry = AccessEntry(ctx.state.next_id("access_level", 1000))
    _fill(ctx, project, entry, item, kind)
    key = (entry.access_level, entry.user_id, entry.group_id)
    if any((e.access_level, e.user_id, e.group_id) == key for e in entries):
        what = "user" if entry.user_id is not None else "access level"
        raise ApiError(422, [f"{kind.capitalize()} access levels {what} has already been taken"])
    entries.append(entry)


@router.route("GET", P + "/protected_branches")
def list_protected(ctx: Ctx) -> Reply:
    """Every rule (wildcards as written), optionally those whose name contains `search`."""
    project = ctx.project()
    search = ctx.text("search") or ""
    rules = [r for r in project.protected_branches.values() if search in r.name]
    return ctx.paginate([protection.render(ctx.state, r) for r in rules])


@router.route("GET", P + "/protected_branches/{name}")
def get_protected(ctx: Ctx) -> Reply:
    """One rule by its exact name (URL-encoded: `gitops%2F%2A`); 404 when there is none."""
    project = ctx.project()
    return Reply(200, protection.render(ctx.state, _rule(ctx, project)))


@router.route("POST", P + "/protected_branches")
def protect(ctx: Ctx) -> Reply:
    """Protects a branch or wildcard (Maintainer); 409 when the name is already protected."""
    project = ctx.project()
    _maintainer(ctx, project)
    name = str(ctx.require("name"))
    if name in project.protected_branches:
        raise ApiError(409, f"Protected branch '{name}' already exists")
    rule = ProtectedBranch(ctx.state.next_id("protected_branch", 100), name)
    rule.allow_force_push = ctx.flag("allow_force_push")
    if ctx.state.edition == "premium":
        rule.code_owner_approval_required = ctx.flag("code_owner_approval_required")
    for kind in KINDS:
        entries: list[AccessEntry] = getattr(rule, kind)
        items = _items(ctx, kind)
        declared = kind != "unprotect" or ctx.state.edition == "premium"
        level = ctx.params.get(f"{kind}_access_level") if declared else None
        if level is None and not items and declared:
            level = Access.MAINTAINER  # GitLab's default when nothing else is given
        if level is not None:
            _add(ctx, project, entries, {"access_level": level}, kind)
        for item in items:
            _add(ctx, project, entries, item, kind)
    project.protected_branches[name] = rule
    return Reply(201, protection.render(ctx.state, rule))


@router.route("PATCH", P + "/protected_branches/{name}")
def update_protected(ctx: Ctx) -> Reply:
    """Updates a rule: `allow_force_push`; on Premium also entries by `id` (or `_destroy`)."""
    project = ctx.project()
    _maintainer(ctx, project)
    rule = _rule(ctx, project)
    if ctx.has("allow_force_push"):
        rule.allow_force_push = ctx.flag("allow_force_push")
    if ctx.state.edition == "premium" and ctx.has("code_owner_approval_required"):
        rule.code_owner_approval_required = ctx.flag("code_owner_approval_required")
    for kind in KINDS:
        entries: list[AccessEntry] = getattr(rule, kind)
        for item in _items(ctx, kind):
            if item.get("id") is None:
                _add(ctx, project, entries, item, kind)
                continue
            entry_id = _int(item["id"], f"allowed_to_{kind}[id]")
            entry = next((e for e in entries if e.id == entry_id), None)
            if entry is None:
                raise not_found("Not found")
            if item.get("_destroy") in {True, "true", "1"}:
                entries.remove(entry)
            else:
                _fill(ctx, project, entry, item, kind)
    return Reply(200, protection.render(ctx.state, rule))


@router.route("DELETE", P + "/protected_branches/{name}")
def unprotect(ctx: Ctx) -> Reply:
    """Removes a rule (Maintainer)."""
    project = ctx.project()
    _maintainer(ctx, project)
    del project.protected_branches[_rule(ctx, project).name]
    return Reply(204)
