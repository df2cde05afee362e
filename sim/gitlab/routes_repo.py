"""Routes for users, projects, branches, commits, files, members, hooks and check items."""

from __future__ import annotations

from . import protection, render, repo
from .errors import ApiError, bad_request, forbidden, not_found
from .model import HOOK_FLAGS, Access, Commit, Hook, Project
from .routes_compare import resolve_ref
from .routing import Ctx, Reply, router

P = "/projects/{project}"


def _need(ctx: Ctx, project: Project, level: int) -> None:
    """403 unless the caller has at least `level` on the project."""
    if ctx.state.access(project, ctx.user.id) < level:
        raise forbidden()


def _resolve(ctx: Ctx, project: Project, ref: str) -> Commit:
    """A ref (routes_compare.resolve_ref: a tag before a branch of the same name; `HEAD` the
    default branch) as a commit; GitLab's `404 Commit Not Found` otherwise."""
    if ref == "HEAD" and project.default_branch in project.branches:
        ref = project.default_branch
    commit = resolve_ref(ctx, project, ref)
    if commit is None:
        raise not_found("Commit Not Found")
    return commit


@router.route("GET", "/user")
def current_user(ctx: Ctx) -> Reply:
    """The token's user."""
    out = render.user(ctx.state, ctx.user)
    out.update(email=f"{ctx.user.username}@example.com", is_admin=False, bot=False)
    return Reply(200, out)


@router.route("GET", "/version")
def version(ctx: Ctx) -> Reply:
    """The instance's version as the version profile says (any valid token may read it)."""
    return Reply(200, {"version": ctx.state.profile.version, "revision": "sim"})


@router.route("GET", "/personal_access_tokens/self")
def token_self(ctx: Ctx) -> Reply:
    """The caller's token: its scopes, and that it is active."""
    user = ctx.user
    return Reply(
        200,
        {
            "id": user.id,
            "name": "token",
            "user_id": user.id,
            "active": True,
            "revoked": False,
            "scopes": list(user.scopes),
        },
    )


@router.route("GET", "/users/{user_id:int}")
def get_user(ctx: Ctx) -> Reply:
    """A user by id."""
    found = ctx.state.users.get(int(ctx.args["user_id"]))
    if found is None:
        raise not_found("User Not Found")
    return Reply(200, render.user(ctx.state, found))


@router.route("GET", P)
def get_project(ctx: Ctx) -> Reply:
    """A project by id or encoded path."""
    return Reply(200, render.project(ctx.state, ctx.project()))


@router.route("GET", P + "/repository/branches")
def list_branches(ctx: Ctx) -> Reply:
    """Every branch, by name."""
    project = ctx.project()
    return ctx.paginate([render.branch(ctx.state, project, b) for b in sorted(project.branches)])


@router.route("GET", P + "/repository/branches/{branch}")
def get_branch(ctx: Ctx) -> Reply:
    """One branch; 404 when missing."""
    project = ctx.project()
    if ctx.args["branch"] not in project.branches:
        raise not_found("Branch Not Found")
    return Reply(200, render.branch(ctx.state, project, ctx.args["branch"]))


@router.route("POST", P + "/repository/branches")
def create_branch(ctx: Ctx) -> Reply:
    """A new branch at `ref`; 400 when it exists or the ref is unknown."""
    project = ctx.project()
    _need(ctx, project, Access.DEVELOPER)
    name, ref = str(ctx.require("branch")), str(ctx.require("ref"))
    if name in project.branches:
        raise bad_request("Branch already exists")
    if not protection.can_push(ctx.state, project, ctx.user, name):
        raise bad_request(protection.CREATE)  # GitLab's pre-receive refusal, answered as 400
    try:
        start = _resolve(ctx, project, ref)
    except ApiError:
        raise bad_request(f"Invalid reference name: {ref}") from None
    ctx.state.move_branch(project, name, start.sha, ctx.user)
    return Reply(201, render.branch(ctx.state, project, name))


@router.route("DELETE", P + "/repository/branches/{branch}")
def delete_branch(ctx: Ctx) -> Reply:
    """Deletes a branch (lib/api/branches.rb, Branches::DeleteService): 403 below Developer
    (`authorize_push_project`), 404 when missing, 400 with the pre-receive check's message for
    the default branch or a protected one the caller may not delete (Maintainer needed:
    Gitlab::Checks::BranchCheck, UserAccess#can_delete_branch?)."""
    project = ctx.project()
    _need(ctx, project, Access.DEVELOPER)
    if ctx.args["branch"] not in project.branches:
        raise not_found("Branch Not Found")
    if ctx.args["branch"] == project.default_branch:
        raise bad_request(protection.DELETE_DEFAULT)
    if not protection.can_delete(ctx.state, project, ctx.user, ctx.args["branch"]):
        raise bad_request(protection.DELETE)
    del project.branches[ctx.args["branch"]]
    return Reply(204)


@router.route("POST", P + "/repository/commits")
def create_commit(ctx: Ctx) -> Reply:
    """Commits actions on `branch` (created from `start_branch` when new)."""
    project = ctx.project()
    _need(ctx, project, Access.DEVELOPER)
    branch = str(ctx.require("branch"))
    if not protection.can_push(ctx.state, project, ctx.user, branch):
        raise ApiError(403, f"403 Forbidden - {protection.PUSH_API}")
    message = str(ctx.require("commit_message"))
    actions = ctx.require("actions")
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise ApiError(400, None, error="actions is invalid")
    start = ctx.text("start_branch") or ctx.text("start_sha")
    start_sha: str | None = None
    if branch in project.branches:
        if start and start != branch:
            raise bad_request(f"A branch called '{branch}' already exists.")
        base = ctx.state.commits[project.branches[branch]].tree
    elif start:
        try:
            start_commit = _resolve(ctx, project, start)
        except ApiError:
            raise bad_request(f"Invalid start branch: {start}") from None
        start_sha, base = start_commit.sha, start_commit.tree
    elif project.branches:
        raise bad_request("You can only create or edit files when you are on a branch")
    else:
        base = {}
    tree = repo.apply_actions(base, actions)
    commit = ctx.state.push(project, branch, tree, message, ctx.user, start_sha)
    return Reply(201, render.commit(ctx.state, project, commit))


@router.route("GET", P + "/repository/commits")
def list_commits(ctx: Ctx) -> Reply:
    """Commits reachable from `ref_name` (default branch), newest first."""
    project = ctx.project()
    ref = ctx.text("ref_name") or project.default_branch
    if not project.branches and ref == project.default_branch:
        return ctx.paginate([])
    head = _resolve(ctx, project, ref)
    log = repo.history(ctx.state.commits, head.sha)
    return ctx.paginate([render.commit(ctx.state, project, c) for c in log])


@router.route("GET", P + "/repository/commits/{sha}")
def get_commit(ctx: Ctx) -> Reply:
    """One commit by sha or branch name."""
    project = ctx.project()
    return Reply(200, render.commit(ctx.state, project, _resolve(ctx, project, ctx.args["sha"])))


@router.route("GET", P + "/repository/tree")
def list_tree(ctx: Ctx) -> Reply:
    """The files and directories under `path` at `ref` (default branch), every depth with
    `recursive`; paginated (lib/api/repositories.rb: 404 "Tree Not Found" for an unknown ref
    or a path that is no directory)."""
    project = ctx.project()
    try:
        commit = _resolve(ctx, project, ctx.text("ref") or project.default_branch)
    except ApiError:
        raise not_found("Tree Not Found") from None
    entries = repo.tree_entries(commit.tree, ctx.text("path") or "", ctx.flag("recursive"))
    if entries is None:
        raise not_found("Tree Not Found")
    return ctx.paginate(entries)


def _file_at(ctx: Ctx, project: Project) -> tuple[Commit, str, str]:
    """The commit, path and ref of a file request; GitLab's 404 when absent."""
    ref = ctx.text("ref") or project.default_branch
    commit = _resolve(ctx, project, ref)
    path = ctx.args["file_path"]
    if path not in commit.tree:
        raise not_found("File Not Found")
    return commit, path, ref


@router.route("GET", P + "/repository/files/{file_path}/raw")
def raw_file(ctx: Ctx) -> Reply:
    """A file's raw content at `ref`, with GitLab's `X-Gitlab-*` file headers."""
    commit, path, ref = _file_at(ctx, ctx.project())
    headers = render.file_headers(ctx.state, commit, path, ref)
    return Reply(200, commit.tree[path].encode(), headers)


@router.route("GET", P + "/repository/files/{file_path}")
def get_file(ctx: Ctx) -> Reply:
    """A file's metadata and base64 content at `ref`; HEAD answers the same headers, no body."""
    commit, path, ref = _file_at(ctx, ctx.project())
    headers = render.file_headers(ctx.state, commit, path, ref)
    return Reply(200, render.file(ctx.state, commit, path, ref), headers)


@router.route("GET", P + "/members/all")
def list_members(ctx: Ctx) -> Reply:
    """Every member with its access level."""
    project, users = ctx.project(), ctx.state.users
    members = [render.member(ctx.state, users[u], lvl) for u, lvl in project.members.items()]
    return ctx.paginate(members)


@router.route("GET", P + "/members/all/{user_id:int}")
def get_member(ctx: Ctx) -> Reply:
    """One member's access level; 404 when not a member."""
    project = ctx.project()
    user_id = int(ctx.args["user_id"])
    if user_id not in project.members or user_id not in ctx.state.users:
        raise not_found("Not found")
    return Reply(200, render.member(ctx.state, ctx.state.users[user_id], project.members[user_id]))


@router.route("GET", P + "/approval_check_items")
def get_check_items(ctx: Ctx) -> Reply:
    """Our configuration endpoint: the check items an approval must confirm."""
    items = ctx.project().check_items
    return Reply(200, {"enabled": items is not None, "check_items": list(items or [])})


def _hook(ctx: Ctx) -> tuple[Project, Hook]:
    """The project and the hook named in the path (maintainers only)."""
    project = ctx.project()
    _need(ctx, project, Access.MAINTAINER)
    hook = project.hooks.get(int(ctx.args["hook_id"]))
    if hook is None:
        raise not_found("Not found")
    return project, hook


def _apply_hook_params(ctx: Ctx, hook: Hook) -> None:
    """Copies the hook fields the caller sent."""
    hook.url = ctx.text("url") or hook.url
    if ctx.has("token"):
        hook.token = ctx.text("token")
    for flag, default in hook.flags.items():
        hook.flags[flag] = ctx.flag(flag, default)
    hook.enable_ssl_verification = ctx.flag("enable_ssl_verification", hook.enable_ssl_verification)


@router.route("GET", P + "/hooks")
def list_hooks(ctx: Ctx) -> Reply:
    """Every hook of the project."""
    project = ctx.project()
    _need(ctx, project, Access.MAINTAINER)
    return ctx.paginate([render.hook(h) for h in project.hooks.values()])


@router.route("GET", P + "/hooks/{hook_id:int}")
def get_hook(ctx: Ctx) -> Reply:
    """One hook."""
    return Reply(200, render.hook(_hook(ctx)[1]))


@router.route("POST", P + "/hooks")
def create_hook(ctx: Ctx) -> Reply:
    """Adds a hook."""
    project = ctx.project()
    _need(ctx, project, Access.MAINTAINER)
    url = str(ctx.require("url"))
    hook_id = ctx.state.next_id("hook")
    hook = Hook(hook_id, project.id, url, None, dict(HOOK_FLAGS), True, ctx.state.clock())
    _apply_hook_params(ctx, hook)
    project.hooks[hook.id] = hook
    return Reply(201, render.hook(hook))


@router.route("PUT", P + "/hooks/{hook_id:int}")
def update_hook(ctx: Ctx) -> Reply:
    """Edits a hook (GitLab re-enables a disabled hook only after a successful test call)."""
    _, hook = _hook(ctx)
    _apply_hook_params(ctx, hook)
    return Reply(200, render.hook(hook))


@router.route("DELETE", P + "/hooks/{hook_id:int}")
def delete_hook(ctx: Ctx) -> Reply:
    """Removes a hook."""
    project, hook = _hook(ctx)
    del project.hooks[hook.id]
    return Reply(204)
