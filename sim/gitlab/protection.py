"""Protected branches: which rules match a branch, and who may push, merge, force-push or delete.

GitLab's rules, as the double applies them: a branch is protected when any rule's name matches
it (`*` in a name matches any characters, `/` included). A user may push (or merge) when any
push (merge) entry of any matching rule lets them: a role entry by access level (0 lets nobody),
a user entry that user (Premium only: CE has no per-user entries and ignores them), and always
only with at least Developer access. Force pushes need every matching rule to allow them;
deleting a protected branch needs Maintainer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import repo
from .errors import ApiError
from .model import Access, AccessEntry, Project, ProtectedBranch, User

if TYPE_CHECKING:
    from .state import State

JSON = dict[str, Any]
#: The access levels a role entry may name (`ProtectedRefAccess.allowed_access_levels`).
ALLOWED_LEVELS = (0, 30, 40, 60)
ROLE_NAMES = {0: "No one", 30: "Developers + Maintainers", 40: "Maintainers", 60: "Administrators"}
#: GitLab's refusals (`Gitlab::GitAccess` and the REST API).
PUSH_API = "You are not allowed to push into this branch"
PUSH_GIT = "You are not allowed to push code to protected branches on this project."
FORCE_PUSH_GIT = "You are not allowed to force push code to a protected branch on this project."
CREATE = "You are not allowed to create protected branches on this project."
DELETE_DEFAULT = "The default branch of a project cannot be deleted."
DELETE = (
    "You are not allowed to delete protected branches from this project. "
    "Only a project maintainer or owner can delete a protected branch."
)


def matches(rule: str, branch: str) -> bool:
    """Whether a rule name (exact, or with `*` wildcards) covers the branch."""
    if "*" not in rule:
        return rule == branch
    pattern = ".*".join(re.escape(part) for part in rule.split("*"))
    return re.fullmatch(pattern, branch) is not None


def rules_for(project: Project, branch: str) -> list[ProtectedBranch]:
    """The protection rules that match the branch."""
    return [rule for rule in project.protected_branches.values() if matches(rule.name, branch)]


def _allows(state: State, project: Project, entry: AccessEntry, user: User) -> bool:
    if entry.user_id is not None:
        return state.edition == "premium" and entry.user_id == user.id
    if entry.group_id is not None or entry.deploy_key_id is not None:
        return False  # the double has no groups, and deploy keys do not use the API
    level = entry.access_level or 0
    # 0 is "No one"; 60 is instance administrators, of which the double has none
    return level in {30, 40} and state.access(project, user.id) >= level


def can_push(state: State, project: Project, user: User, branch: str) -> bool:
    """`Gitlab::UserAccess#can_push_to_branch?`."""
    if state.access(project, user.id) < Access.DEVELOPER:
        return False
    rules = rules_for(project, branch)
    return not rules or any(_allows(state, project, e, user) for r in rules for e in r.push)


def can_merge(state: State, project: Project, user: User, branch: str) -> bool:
    """`MergeRequest#can_be_merged_by?`: may push to, or merge into, the target branch."""
    if can_push(state, project, user, branch):
        return True
    rules = rules_for(project, branch)
    return (
        bool(rules)
        and state.access(project, user.id) >= Access.DEVELOPER
        and any(_allows(state, project, e, user) for r in rules for e in r.merge)
    )


def force_push_allowed(project: Project, branch: str) -> bool:
    """Whether history on the branch may be rewritten (every matching rule allows it)."""
    return all(rule.allow_force_push for rule in rules_for(project, branch))


def can_delete(state: State, project: Project, user: User, branch: str) -> bool:
    """Branch deletion through the API: Developer, or Maintainer for a protected branch."""
    needed = Access.MAINTAINER if rules_for(project, branch) else Access.DEVELOPER
    return state.access(project, user.id) >= needed


def can_remove_source_branch(state: State, project: Project, user: User, branch: str) -> bool:
    """`MergeRequest#can_remove_source_branch?`, checked again after a merge before the source
    branch is deleted (MergeService#delete_source_branch?): never a protected branch (whoever
    merges, Maintainer included) nor the default branch, and only by someone who may push code
    (Developer). Otherwise GitLab keeps the branch and says nothing. GitLab: app/models/
    merge_request.rb, app/services/merge_requests/merge_service.rb."""
    return (
        not rules_for(project, branch)
        and branch != project.default_branch
        and state.access(project, user.id) >= Access.DEVELOPER
    )


def check_person_push(state: State, project: Project, user: User, branch: str, onto: str) -> None:
    """A `git push` by a person of a commit whose parent is `onto`: GitLab's pre-receive
    refusals as ApiError(403) (a protected branch the user may not push to; a rewrite of its
    history where a rule forbids force pushes). An unprotected branch takes any push: the
    double's people need no membership to push (a fork's branch, a test's setup)."""
    if not rules_for(project, branch):
        return
    if not can_push(state, project, user, branch):
        raise ApiError(403, PUSH_GIT)
    old = project.branches.get(branch)
    rewrite = old is not None and not repo.is_ancestor(state.commits, old, onto)
    if rewrite and not force_push_allowed(project, branch):
        raise ApiError(403, FORCE_PUSH_GIT)


# -- the API's view ---------------------------------------------------------------------------


def _describe(state: State, entry: AccessEntry) -> str:
    if entry.user_id is not None:
        user = state.users.get(entry.user_id)
        return user.name if user else "User"
    if entry.group_id is not None:
        return "Group"
    if entry.deploy_key_id is not None:
        return "Deploy key"
    return ROLE_NAMES.get(entry.access_level or 0, "No one")


def _entry(state: State, entry: AccessEntry) -> JSON:
    out: JSON = {
        "id": entry.id,
        "access_level": entry.access_level,
        "access_level_description": _describe(state, entry),
    }
    if entry.deploy_key_id is not None:
        out["deploy_key_id"] = entry.deploy_key_id
    if state.edition == "premium":
        out.update(user_id=entry.user_id, group_id=entry.group_id)
    return out


def render(state: State, rule: ProtectedBranch) -> JSON:
    """A protected branch as the API answers it; Premium adds user/group ids and unprotect."""
    out: JSON = {
        "id": rule.id,
        "name": rule.name,
        "push_access_levels": [_entry(state, e) for e in rule.push],
        "merge_access_levels": [_entry(state, e) for e in rule.merge],
        "allow_force_push": rule.allow_force_push,
        "code_owner_approval_required": rule.code_owner_approval_required,
    }
    if state.edition == "premium":
        out["unprotect_access_levels"] = [_entry(state, e) for e in rule.unprotect]
        out["inherited"] = False
    return out
