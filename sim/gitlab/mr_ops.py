"""Merge request operations shared by the REST routes and the test control methods.

Each raises `ApiError` with GitLab's answer when GitLab would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import flow, protection, repo, trains
from .errors import ApiError, forbidden, not_found, unauthorized
from .model import Access, MergeRequest, Project, User

if TYPE_CHECKING:
    from .state import State

REBASE_FAILED = "Rebase failed: Rebase locally, resolve all conflicts, then push the branch."
#: PUT /merge's messages (lib/api/merge_requests.rb; lib/api/helpers.rb check_sha_param! adds
#: ": <head sha>" to the mismatch)
SHA_REQUIRED = "SHA must be provided when merging"
SHA_MISMATCH = "SHA does not match HEAD of source branch"
CANNOT_BE_MERGED = "Branch cannot be merged"
NOT_ALLOWED = "405 Method Not Allowed"
#: `detailed_merge_status` values of GitLab's `mergeable_git_state_checks`
GIT_CHECKS = frozenset({"conflict", "need_rebase"})
#: Issuable::DESCRIPTION_LENGTH_MAX (app/models/concerns/issuable.rb: 1.megabyte characters)
DESCRIPTION_LENGTH_MAX = 1_048_576


def open_mr(
    state: State,
    project: Project,
    author: User,
    *,
    source_branch: str,
    target_branch: str,
    title: str,
    description: str = "",
    labels: Iterable[str] = (),
    remove_source_branch: bool = False,
    source_project: Project | None = None,
) -> MergeRequest:
    """Opens an MR (and its first pipeline); 409/422 like GitLab for duplicates and bad refs,
    400 for a description over 1,048,576 characters."""
    check_description(description)
    source = source_project or project
    if source_branch not in source.branches:
        raise ApiError(422, [f'Source branch "{source_branch}" does not exist'])
    if target_branch not in project.branches:
        raise ApiError(422, [f'Target branch "{target_branch}" does not exist'])
    if source is project and source_branch == target_branch:
        raise ApiError(422, ["You can't use same project/branch for source and target"])
    for other in project.mrs.values():
        if (
            other.state == "opened"
            and other.source_project_id == source.id
            and other.source_branch == source_branch
            and other.target_branch == target_branch
        ):
            message = (
                f"Another open merge request already exists for this source branch: !{other.iid}"
            )
            raise ApiError(409, [message])
    now = state.clock()
    mr = MergeRequest(
        id=state.next_id("mr", 500),
        iid=project.next_mr_iid,
        project_id=project.id,
        source_project_id=source.id,
        source_branch=source_branch,
        target_branch=target_branch,
        title=title,
        description=description,
        author_id=author.id,
        sha=source.branches[source_branch],
        created_at=now,
        updated_at=now,
        labels=list(dict.fromkeys(labels)),
        remove_source_branch=remove_source_branch,
    )
    project.next_mr_iid += 1
    project.mrs[mr.iid] = mr
    state.emit(project, "merge_request", mr=mr, actor=author, action="open")
    state.create_pipeline(project, mr, author)
    return mr


def update_mr(
    state: State, project: Project, mr: MergeRequest, actor: User, params: dict[str, Any]
) -> None:
    """PUT /merge_requests/:iid: labels, title, description, state_event, branch options."""
    if actor.id != mr.author_id and state.access(project, actor.id) < Access.DEVELOPER:
        raise forbidden()
    if params.get("description") is not None:
        check_description(str(params["description"]))
    target = params.get("target_branch")
    if target is not None and target != mr.target_branch:
        check_target(state, project, mr, str(target))
    before = list(mr.labels)
    previous = {name: getattr(mr, name) for name in ("title", "description", "target_branch")}
    if params.get("labels") is not None:
        mr.labels = list(dict.fromkeys(params["labels"]))
    for label in params.get("add_labels") or []:
        if label not in mr.labels:
            mr.labels.append(label)
    removed = set(params.get("remove_labels") or [])
    mr.labels = [label for label in mr.labels if label not in removed]
    for name in ("title", "description", "target_branch"):
        if params.get(name) is not None:
            setattr(mr, name, str(params[name]))
    if params.get("remove_source_branch") is not None:
        mr.remove_source_branch = bool(params["remove_source_branch"])
    action = "update"
    event = params.get("state_event")
    if event == "close" and mr.state == "opened":
        mr.state, mr.closed_at, mr.closed_by_id, action = "closed", state.clock(), actor.id, "close"
    elif event == "reopen" and mr.state == "closed":
        mr.state, mr.closed_at, mr.closed_by_id, action = "opened", None, None, "reopen"
    mr.updated_at = state.clock()
    changes: dict[str, Any] = {
        name: {"previous": value, "current": getattr(mr, name)}
        for name, value in previous.items()
        if getattr(mr, name) != value
    }
    if before != mr.labels:
        changes["labels"] = {"previous": before, "current": list(mr.labels)}
    state.emit(project, "merge_request", mr=mr, actor=actor, action=action, changes=changes)


def check_description(description: str) -> None:
    """Issuable's `validates :description, length: { maximum: DESCRIPTION_LENGTH_MAX }`: up to
    1,048,576 characters (not bytes) are accepted; more is GitLab's 400 validation error
    (render_validation_error!, from handle_merge_request_errors! / the update's errors)."""
    if len(description) > DESCRIPTION_LENGTH_MAX:
        raise ApiError(
            400, {"description": [f"is too long (maximum is {DESCRIPTION_LENGTH_MAX} characters)"]}
        )


def check_target(state: State, project: Project, mr: MergeRequest, target: str) -> None:
    """A new target branch must exist and differ from the source; no other open MR may have the
    same source and target (GitLab's 422s)."""
    if target not in project.branches:
        raise ApiError(422, [f'Target branch "{target}" does not exist'])
    if mr.source_project_id == project.id and mr.source_branch == target:
        raise ApiError(422, ["You can't use same project/branch for source and target"])
    for other in project.mrs.values():
        if (
            other is not mr
            and other.state == "opened"
            and other.source_project_id == mr.source_project_id
            and other.source_branch == mr.source_branch
            and other.target_branch == target
        ):
            message = (
                f"Another open merge request already exists for this source branch: !{other.iid}"
            )
            raise ApiError(422, [message])


def approve(
    state: State,
    project: Project,
    mr: MergeRequest,
    actor: User,
    *,
    sha: str | None = None,
    check_items: Any = None,
) -> None:
    """POST /approve: 401 not allowed, 409 stale sha, 422 check items, 401/304 on a repeat."""
    allowed = (
        mr.state == "opened"
        and state.access(project, actor.id) >= Access.DEVELOPER
        and actor.id not in project.denied_approvers
    )
    if not allowed:
        raise unauthorized()
    if sha is not None and sha != mr.sha:
        raise ApiError(409, f"SHA does not match HEAD of source branch: {mr.sha}")
    if project.check_items is not None and check_items != project.check_items:
        raise ApiError(
            422,
            "Approval requires confirming the current check items",
            check_items=list(project.check_items),
        )
    if actor.id in mr.approvals:
        # GitLab up to the newest release: 401 (ApprovalService refuses, `unauthorized!`); the
        # newest: 304 (`not_modified! if approved_by?`, !244481). See versions.Profile.
        if state.profile.repeat_approve == 304:
            raise ApiError(304, None)
        raise unauthorized()
    mr.approvals.append(actor.id)
    mr.updated_at = state.clock()
    state.emit(project, "merge_request", mr=mr, actor=actor, action="approval")
    if len(mr.approvals) >= project.required_approvals:
        state.emit(project, "merge_request", mr=mr, actor=actor, action="approved")
    trains.on_change(state, project)  # an MR waiting for its approvals joins its merge train


def unapprove(state: State, project: Project, mr: MergeRequest, actor: User) -> None:
    """POST /unapprove: 404 when this user had not approved (304 on the newest GitLab:
    `not_modified! unless approved_by?`, !244481)."""
    if actor.id not in mr.approvals:
        if state.profile.unapprove_absent == 304:
            raise ApiError(304, None)
        raise not_found("Not Found")
    was_approved = len(mr.approvals) >= project.required_approvals
    mr.approvals.remove(actor.id)
    state.emit(project, "merge_request", mr=mr, actor=actor, action="unapproval")
    if was_approved and len(mr.approvals) < project.required_approvals:
        state.emit(project, "merge_request", mr=mr, actor=actor, action="unapproved")


def merge(
    state: State,
    project: Project,
    mr: MergeRequest,
    actor: User,
    *,
    sha: str | None = None,
    remove_source_branch: bool | None = None,
    message: str | None = None,
    squash: bool | None = None,
) -> None:
    """PUT /merge, refused as the version profile's GitLab does (versions.CHECK_ORDERS):
    400 no `sha` where the group requires one (19.2+), 401 may not merge into the target (too
    low a role, or a protected target branch whose push and merge lists leave the caller out),
    405 not mergeable now, 406/422 "Branch cannot be merged" (conflict, or a rebase needed),
    409 stale sha. The merge's result follows the merge method and squashing (`merge_result`)."""
    flow.check_now(state, project, mr)  # `mergeable?` checks mergeability synchronously
    check_merge(state, project, mr, actor, sha)
    if squash:
        mr.squash = True  # the API stores `squash` on the MR before merging
    new_head = merge_result(state, project, mr, actor, message)
    mr.state = "merged"
    mr.merged_by_id = actor.id
    mr.merged_at = mr.updated_at = state.clock()
    state.move_branch(project, mr.target_branch, new_head, actor)
    remove = mr.remove_source_branch if remove_source_branch is None else remove_source_branch
    source = state.projects[mr.source_project_id]
    # GitLab deletes the source branch as the merging user, and never a protected one: it stays
    # without a word (MergeService#delete_source_branch? -> can_remove_source_branch?)
    if remove and protection.can_remove_source_branch(state, source, actor, mr.source_branch):
        source.branches.pop(mr.source_branch, None)
    state.emit(project, "merge_request", mr=mr, actor=actor, action="merge")


def merge_result(
    state: State, project: Project, mr: MergeRequest, actor: User, message: str | None
) -> str:
    """The commits a merge makes and the target's new head, as
    MergeRequests::MergeStrategies::FromSourceBranch#execute_git_merge! makes them:

    - squashing first squashes the MR into one commit on the target's head (Gitaly UserSquash:
      the head rebased onto the start commit), recorded as `squash_commit_sha`;
    - `ff` (fast-forward) moves the target to the (squashed) head: no merge commit,
      `merge_commit_sha` stays null in the API and the MR Hook;
    - `merge` and `rebase_merge` (semi-linear, which first needs the head up to date) make a
      merge commit [target head, (squashed) head], recorded as `merge_commit_sha`.
    """
    commits = state.commits
    target = project.branches[mr.target_branch]
    mr.diff_base_sha = repo.merge_base(commits, target, mr.sha)
    source = mr.sha
    if flow.squash_on_merge(project, mr):
        tree = repo.combined_tree(commits, mr.sha, target)
        squashed = state.make_commit((target,), tree, mr.title, mr.author_id)
        source = mr.squash_commit_sha = squashed.sha
    if project.merge_method == "ff":
        return source
    default = (
        f"Merge branch '{mr.source_branch}' into '{mr.target_branch}'\n\n{mr.title}\n\n"
        f"See merge request {project.path}!{mr.iid}"
    )
    tree = repo.combined_tree(commits, source, target)
    commit = state.make_commit((target, source), tree, message or default, actor.id)
    mr.merge_commit_sha = commit.sha
    return commit.sha


def check_merge(
    state: State, project: Project, mr: MergeRequest, actor: User, sha: str | None
) -> None:
    """PUT /merge's refusals in the profile's order. GitLab: lib/api/merge_requests.rb
    (`put ':id/merge_requests/:merge_request_iid/merge'`, execute_merge)."""
    profile = state.profile
    if profile.require_sha_setting and not sha and _sha_required(state, project):
        raise ApiError(400, SHA_REQUIRED)
    if not protection.can_merge(state, project, actor, mr.target_branch):
        raise unauthorized()
    stale = sha is not None and sha != mr.sha
    if profile.check_order == "sha-first":
        if stale:
            raise ApiError(409, f"{SHA_MISMATCH}: {mr.sha}")
        if state.detailed_status(project, mr) != "mergeable":
            raise ApiError(405, NOT_ALLOWED)  # `not_allowed! unless mergeable?`: conflicts too
        return
    status = state.detailed_status(project, mr)
    # "state-first": `not_allowed!` unless mergeable_state? (the checks but the git ones) first
    if (
        profile.check_order == "state-first"
        and status in GIT_CHECKS
        and state.detailed_status(project, mr, git_checks=False) != "mergeable"
    ):
        raise ApiError(405, NOT_ALLOWED)
    if status in GIT_CHECKS:
        raise ApiError(profile.cannot_be_merged, CANNOT_BE_MERGED)
    if status != "mergeable":
        raise ApiError(405, NOT_ALLOWED)
    if stale:
        raise ApiError(409, f"{SHA_MISMATCH}: {mr.sha}")


def _sha_required(state: State, project: Project) -> bool:
    """`user_project.namespace.require_sha_for_merge?`: the project's group (or a parent
    group) has the setting on."""
    namespace = project.namespace
    return any(
        namespace == name or namespace.startswith(name + "/")
        for name in state.require_sha_namespaces
    )


def start_rebase(state: State, project: Project, mr: MergeRequest, actor: User) -> None:
    """PUT /rebase: queues a rebase (it completes when the test or the read counter says).
    403 `merge_error` when the caller may not push to the source branch, or a protection rule
    there forbids force pushes (a rebase rewrites the branch)."""
    if actor.id != mr.author_id and state.access(project, actor.id) < Access.DEVELOPER:
        raise forbidden()
    if mr.state != "opened":
        raise forbidden()
    source = state.projects[mr.source_project_id]
    if not protection.can_push(state, source, actor, mr.source_branch):
        raise ApiError(403, None, merge_error="Cannot push to source branch")
    if not protection.force_push_allowed(source, mr.source_branch):
        raise ApiError(403, None, merge_error="Source branch is protected from force push")
    if mr.rebase_in_progress:
        raise ApiError(409, "Rebase in progress")
    mr.rebase_in_progress = True
    mr.rebase_reads = 0
    mr.rebase_started_at = state.clock()
    mr.merge_error = None


def complete_rebase(
    state: State,
    project: Project,
    mr: MergeRequest,
    ok: bool | None = None,
    error: str | None = None,
) -> None:
    """Finishes a queued rebase: success moves the source branch; failure sets merge_error.

    `ok=None` uses the planned outcome, else fails exactly when the files conflict.
    """
    if not mr.rebase_in_progress:
        raise RuntimeError(f"no rebase in progress on !{mr.iid}")
    mr.rebase_in_progress = False
    target = project.branches[mr.target_branch]
    outcome = ok if ok is not None else mr.rebase_outcome
    mr.rebase_outcome = None
    if outcome is None:
        outcome = not (mr.forced_conflict or repo.conflicting_paths(state.commits, mr.sha, target))
    if not outcome:
        mr.rebase_failed = True
        mr.merge_error = error or REBASE_FAILED
        return
    if repo.is_ancestor(state.commits, target, mr.sha):
        return
    head = state.commits[mr.sha]
    tree = repo.combined_tree(state.commits, mr.sha, target)
    commit = state.make_commit((target,), tree, head.message, head.author_id)
    mr.rebase_commit_sha = commit.sha  # a push of exactly this head keeps the approvals
    source = state.projects[mr.source_project_id]
    state.move_branch(source, mr.source_branch, commit.sha, state.users[mr.author_id])


def count_read(state: State, project: Project, mr: MergeRequest) -> None:
    """A read of the MR; a queued rebase completes once `rebase_auto_after` reads saw it."""
    if not mr.rebase_in_progress or state.rebase_auto_after is None:
        return
    mr.rebase_reads += 1
    if mr.rebase_reads > state.rebase_auto_after:
        complete_rebase(state, project, mr)
