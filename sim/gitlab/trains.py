"""Merge trains (GitLab Premium): a queue per target branch whose cars each test a merge result.

What the double does, after GitLab's `MergeTrains::*` services (the bot's needs only):

- `add`: `POST /merge_trains/merge_requests/:iid`. A mergeable MR joins the train of its target
  branch (a car, system note "started a merge train" or "added this merge request to the merge
  train at position N"); with `auto_merge` an MR whose checks are still pending (pipeline
  running, approvals missing, GitLab still checking) gets auto-merge set instead and joins when
  they pass. Refusals as GitLab words them (see `add`).
- Each active car gets a merge result: the car ahead's merge result (or the target's head, for
  the first car) with the MR merged in, as a commit of its own, and a pipeline on it (ref
  `refs/merge-requests/:iid/train`, status `new_pipeline_status`, clocked by `pipeline_seconds`
  like any MR pipeline, or moved by the test).
- The first car whose pipeline succeeded merges: the target moves to its merge result, the MR is
  merged (MR Hook "merge", source branch removed as asked) and the car stays, `merged`.
- A car whose pipeline did not succeed, whose MR was closed or made a draft, whose source branch
  moved, or whose merge result conflicts is dropped: the car is deleted, auto-merge is unset,
  a system note "removed this merge request from the merge train because <reason>" is left, its
  running pipeline is canceled, and every car behind it is rebuilt on the new ref ahead of it
  (new merge result, new pipeline; the old one canceled).

- A target branch moved outside its train (a push): the cars are rebuilt on it (GitLab's
  `CheckStatusService` outdates the first car, and the rest follow).

GitLab does this in background jobs; the double does it at once, after each pipeline status
change, approval, branch move and add (`settle`). System notes are stored without a Note Hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import protection, repo
from .errors import ApiError, forbidden, unauthorized
from .model import RUNNING_STATUSES, Access, MergeRequest, Note, Pipeline, Project, TrainCar, User

if TYPE_CHECKING:
    from .state import State

#: Statuses with which `auto_merge` sets auto-merge instead of refusing: checks that can pass.
CHECKS_PENDING = frozenset(
    {"ci_still_running", "not_approved", "checking", "unchecked", "approvals_syncing"}
)
#: Pipeline statuses GitLab takes for "complete but not succeeded" (`pipeline_not_succeeded?`).
NOT_SUCCEEDED = frozenset({"failed", "canceled", "skipped"})
#: GitLab's words (API refusals, `ProcessError` reasons for dropping a car).
SHA_MISMATCH = "SHA does not match HEAD of source branch: {sha}"
ALREADY_SET = "Merge request is already set to Auto-Merge"
NOT_ENABLED = "400 Bad request - Merge trains are not enabled for this project"
#: (the words of an MR that cannot join now depend on the release: versions.train_refusal)
NO_STRATEGY = "400 Bad request - No available merge train strategy"
CAR_NOT_FOUND = "404 Merge Train Merge Request Not Found"
PIPELINE_FAILED = "pipeline did not succeed"
NOT_MERGEABLE = "merge request is not mergeable"
SOURCE_UPDATED = "source branch was updated"
CONFLICTS = "Conflicts detected during merge"
#: Passes of `settle` before the double gives up (a bug in it, never a GitLab behaviour).
_SETTLE_LIMIT = 1000


def enabled(state: State, project: Project) -> bool:
    """`merge_trains_enabled` as GitLab computes it: the licence, merged results pipelines and
    merge trains all on."""
    return (
        state.edition == "premium"
        and project.merge_pipelines_enabled
        and project.merge_trains_enabled
    )


def check_available(state: State, project: Project, user: User) -> None:
    """GitLab's `authorize! :read_merge_train`: 403 without the licence (Free, CE: `edition`
    "ce") or below Developer."""
    if state.edition != "premium" or state.access(project, user.id) < Access.DEVELOPER:
        raise forbidden()


def cars(
    project: Project, branch: str | None = None, *, active: bool | None = None
) -> list[TrainCar]:
    """The project's cars (of one target branch), oldest first; `active` filters."""
    found = [
        car
        for car in project.train_cars.values()
        if branch in {None, car.target_branch} and active in {None, car.active}
    ]
    return sorted(found, key=lambda car: car.id)


# -- the API's add --------------------------------------------------------------------------


def add(
    state: State,
    project: Project,
    mr: MergeRequest,
    user: User,
    *,
    sha: str | None = None,
    auto_merge: bool = False,
    squash: bool = False,
) -> bool:
    """`POST /merge_trains/merge_requests/:iid`: True when the MR is on the train now (201),
    False when auto-merge was set and it joins once its checks pass (202).

    Refusals: 403 (no licence, below Developer), 409 SHA mismatch (GitLab's `check_sha_param!`),
    401 (may not merge into the target), 409 already set to auto-merge (on a train or waiting),
    400 merge trains not enabled, 400 no available merge train strategy (not mergeable now and,
    without `auto_merge`, not even then; also merged or closed MRs).
    """
    check_available(state, project, user)
    if sha is not None and sha != mr.sha:
        raise ApiError(409, SHA_MISMATCH.format(sha=mr.sha))
    if not protection.can_merge(state, project, user, mr.target_branch):
        raise unauthorized()
    if mr.auto_merge:
        raise ApiError(409, ALREADY_SET)
    if not enabled(state, project):
        raise ApiError(400, NOT_ENABLED)
    status = state.detailed_status(project, mr)
    if mr.state != "opened" or not (
        status == "mergeable" or (auto_merge and status in CHECKS_PENDING)
    ):
        raise ApiError(400, f"400 Bad request - {state.profile.train_refusal}")
    if squash:
        mr.squash = True
    mr.auto_merge, mr.auto_merge_user_id = True, user.id
    boarded = status == "mergeable"
    if boarded:
        _board(state, project, mr, user)
    else:
        body = "enabled automatic add to merge train when checks pass"
        _system_note(state, project, mr, user, body)
    settle(state, project)
    return boarded


def _board(state: State, project: Project, mr: MergeRequest, user: User) -> TrainCar:
    """A new car at the end of the train, with GitLab's system note."""
    now = state.clock()
    car = TrainCar(
        id=state.next_id("train_car", 260),
        mr_iid=mr.iid,
        project_id=project.id,
        target_branch=mr.target_branch,
        user_id=user.id,
        created_at=now,
        updated_at=now,
    )
    position = len(cars(project, mr.target_branch, active=True)) + 1
    project.train_cars[mr.iid] = car
    body = (
        "started a merge train"
        if position == 1
        else f"added this merge request to the merge train at position {position}"
    )
    _system_note(state, project, mr, user, body)
    return car


def _system_note(state: State, project: Project, mr: MergeRequest, user: User, body: str) -> None:
    """A system note on the MR (stored without a Note Hook)."""
    now = state.clock()
    note = Note(state.next_id("note", 3000), body, user.id, mr.iid, now, now, system=True)
    mr.notes[note.id] = note


# -- GitLab's own moves ---------------------------------------------------------------------


def on_new_head(state: State, project: Project, mr: MergeRequest) -> None:
    """The MR's source branch moved: it leaves the train (or its auto-merge is aborted)."""
    car = project.train_cars.get(mr.iid)
    if car is not None and car.active:
        drop(state, project, car, SOURCE_UPDATED)
    elif mr.auto_merge:
        user = state.users[mr.auto_merge_user_id or mr.author_id]
        mr.auto_merge, mr.auto_merge_user_id = False, None
        _system_note(
            state, project, mr, user, f"aborted the automatic merge because {SOURCE_UPDATED}"
        )
    else:
        return
    settle(state, project)


def on_change(state: State, project: Project) -> None:
    """A pipeline moved or an MR was approved: settles the project's trains, if it has any
    car on one or any MR waiting to join one."""
    if any(car.active for car in project.train_cars.values()) or any(
        mr.auto_merge for mr in project.mrs.values()
    ):
        settle(state, project)


def drop(state: State, project: Project, car: TrainCar, reason: str) -> None:
    """GitLab's abort: the car is deleted, auto-merge unset, a system note says why, and the
    car's running pipeline is canceled (the cars behind are rebuilt by `settle`)."""
    mr = project.mrs[car.mr_iid]
    del project.train_cars[car.mr_iid]
    mr.auto_merge, mr.auto_merge_user_id = False, None
    user = state.users[car.user_id]
    _system_note(
        state,
        project,
        mr,
        user,
        f"removed this merge request from the merge train because {reason}",
    )
    pipeline = project.pipelines.get(car.pipeline_id) if car.pipeline_id else None
    if pipeline is not None and pipeline.status in RUNNING_STATUSES:
        state.set_pipeline_status(project, pipeline, "canceled")


def settle(state: State, project: Project) -> None:
    """Brings the project's trains up to date: waiting MRs whose checks passed join, cars are
    validated, rebuilt where the ref ahead changed, and the first cars whose pipelines passed
    merge. Re-entrant: a call made while settling (a pipeline started or canceled here) only
    asks for one more pass."""
    state.trains_pending.add(project.id)
    if state.trains_settling:
        return
    state.trains_settling = True
    try:
        for _ in range(_SETTLE_LIMIT):
            if not state.trains_pending:
                return
            _settle_once(state, state.projects[state.trains_pending.pop()])
        raise RuntimeError("the double's merge trains did not settle")
    finally:
        state.trains_settling = False
        state.trains_pending.clear()


def _settle_once(state: State, project: Project) -> None:
    for mr in sorted(project.mrs.values(), key=lambda m: m.iid):
        waiting = mr.auto_merge and mr.iid not in project.train_cars and mr.state == "opened"
        if waiting and state.detailed_status(project, mr) == "mergeable":
            _board(state, project, mr, state.users[mr.auto_merge_user_id or mr.author_id])
    for branch in sorted({car.target_branch for car in cars(project, active=True)}):
        _refresh(state, project, branch)


def _refresh(state: State, project: Project, branch: str) -> None:
    """One pass over a train, front to back (`MergeTrains::RefreshMergeRequestService`)."""
    ahead = project.branches.get(branch)
    if ahead is None:
        return
    first = True
    for car in cars(project, branch, active=True):
        mr = project.mrs[car.mr_iid]
        if mr.state == "merged":  # merged around the train: the cars behind rebuild on it
            car.status, car.updated_at = "skip_merged", state.clock()
            continue
        if mr.state != "opened" or mr.draft:
            drop(state, project, car, NOT_MERGEABLE)
            continue
        pipeline = project.pipelines.get(car.pipeline_id) if car.pipeline_id else None
        if pipeline is not None and pipeline.status in NOT_SUCCEEDED:
            drop(state, project, car, PIPELINE_FAILED)
            continue
        if pipeline is None or car.base_sha != ahead:
            pipeline = _rebuild(state, project, mr, car, ahead, pipeline)
            if pipeline is None:
                continue
        assert car.train_sha is not None
        ahead = car.train_sha
        if first and pipeline.status == "success":
            _land(state, project, mr, car)
            continue
        first = False


def _rebuild(
    state: State,
    project: Project,
    mr: MergeRequest,
    car: TrainCar,
    ahead: str,
    old: Pipeline | None,
) -> Pipeline | None:
    """A new merge result on `ahead` and a pipeline for it (the old one canceled); None when
    the MR conflicts with it (the car is dropped)."""
    if mr.forced_conflict or repo.conflicting_paths(state.commits, mr.sha, ahead):
        drop(state, project, car, CONFLICTS)
        return None
    author = state.users[car.user_id]
    if project.merge_method == "ff" and repo.is_ancestor(state.commits, ahead, mr.sha):
        train_sha = mr.sha
    elif project.merge_method == "ff":  # the MR rebased onto the ref ahead, as one commit
        head = state.commits[mr.sha]
        tree = repo.combined_tree(state.commits, mr.sha, ahead)
        train_sha = state.make_commit((ahead,), tree, head.message, head.author_id).sha
    else:
        message = (
            f"Merge branch '{mr.source_branch}' into '{mr.target_branch}'\n\n{mr.title}\n\n"
            f"See merge request {project.path}!{mr.iid}"
        )
        tree = repo.combined_tree(state.commits, mr.sha, ahead)
        train_sha = state.make_commit((ahead, mr.sha), tree, message, author.id).sha
    car.base_sha, car.train_sha = ahead, train_sha
    car.status, car.updated_at = "fresh", state.clock()
    now = state.clock()
    pipeline = Pipeline(
        id=state.next_id("pipeline", 1000),
        iid=project.next_pipeline_iid,
        project_id=project.id,
        sha=train_sha,
        before_sha="0" * 40,
        ref=f"refs/merge-requests/{mr.iid}/train",
        status="created",
        source="merge_request_event",
        user_id=author.id,
        created_at=now,
        updated_at=now,
        mr_iid=mr.iid,
    )
    project.next_pipeline_iid += 1
    project.pipelines[pipeline.id] = pipeline
    car.pipeline_id = pipeline.id  # before any hook: the old pipeline is no longer the car's
    if old is not None and old.status in RUNNING_STATUSES:
        state.set_pipeline_status(project, old, "canceled")
    state.set_pipeline_status(project, pipeline, state.new_pipeline_status)
    return pipeline


def _land(state: State, project: Project, mr: MergeRequest, car: TrainCar) -> None:
    """The first car's pipeline passed: the target moves to its merge result, the MR merges."""
    assert car.train_sha is not None
    actor = state.users[car.user_id]
    target = project.branches[car.target_branch]
    now = state.clock()
    car.status, car.updated_at = "merging", now
    mr.diff_base_sha = repo.merge_base(state.commits, target, mr.sha)
    mr.merge_commit_sha = None if project.merge_method == "ff" else car.train_sha
    mr.state, mr.merged_by_id, mr.merged_at, mr.updated_at = "merged", actor.id, now, now
    mr.auto_merge, mr.auto_merge_user_id = False, None
    state.move_branch(project, car.target_branch, car.train_sha, actor)
    source = state.projects[mr.source_project_id]
    if mr.remove_source_branch and protection.can_delete(state, source, actor, mr.source_branch):
        source.branches.pop(mr.source_branch, None)
    car.status, car.merged_at = "merged", now
    state.emit(project, "merge_request", mr=mr, actor=actor, action="merge")
