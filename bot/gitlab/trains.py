"""Merge trains (GitLab Premium and Ultimate): whether a project uses them, adding an MR pinned
to a sha, and following its car until it merged or left the train.

On a train GitLab merges, not the bot: each car's pipeline runs on its merge result (the target
with every MR ahead and this one merged in), the first car whose pipeline passed is merged, and
a car whose pipeline fails (or whose source branch moves, or whose result conflicts) is removed
with a system note "removed this merge request from the merge train because <reason>", the
cars behind it restarting. So the bot adds once (`add_to_train`) and then follows
(`follow_train`, or `train_car` alone) until MERGED or DROPPED.

Like `merge`, nothing here waits: each function makes a bounded number of calls (its docstring
says how many) and returns an outcome; a write whose answer was lost or answered 5xx is read
back before anyone tries again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.gitlab.calls import get_json, get_list, post_answer
from bot.gitlab.client import Project
from bot.gitlab.errors import (
    GitLabConflict,
    GitLabError,
    GitLabRefused,
    GitLabUnavailable,
    MrClosed,
    NotFound,
    UnknownOutcome,
)
from bot.gitlab.merge import WAIT_SECONDS, WAIT_STATUSES
from bot.gitlab.reads import read_mr
from bot.gitlab.version import gitlab_version, train_join_param
from bot.gitlab.views import PIPELINE_RUNNING, MrView, NoteView, TrainCar

log = logging.getLogger(__name__)

#: Suggested seconds between two `follow_train` polls while the MR is on the train or queued
#: (the MR and pipeline webhooks may come sooner; the caller's schedule decides).
FOLLOW_SECONDS = 30.0
#: GitLab's system notes when an MR leaves a train, or its auto-merge is aborted, unmerged.
_LEFT_PREFIXES = (
    "removed this merge request from the merge train because ",
    "aborted the automatic merge because ",
)
#: Notes read (newest first) to find why an MR left the train: one page.
_NOTES_READ = 20


def _car_path(project: Project, iid: int) -> str:
    return f"{project.path}/merge_trains/merge_requests/{int(iid)}"


def _message(err: GitLabError) -> str:
    """GitLab's own words for a refusal (its JSON `message`), else the error's text."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        found = body.get("message") or body.get("error")
        if isinstance(found, str) and found:
            return found
    return str(err)


def uses_merge_trains(project: Project) -> bool:
    """Whether the project merges through merge trains (one GET of the project).

    GitLab shows `merge_trains_enabled` only with a licence that has them (Premium, Ultimate)
    and makes it true only when "Merged results pipelines" and "Merge trains" are both on in the
    project's merge request settings; absent (Free, CE) counts as False.
    """
    data = get_json(project.gl, project.path, what="read the project's merge settings")
    return data.get("merge_trains_enabled") is True


def train_car(project: Project, iid: int) -> TrainCar | None:
    """The MR's merge train car (on the train, merging, or merged), or None when it has none:
    never added, only queued (auto-merge waiting for checks), or dropped (GitLab deletes the car
    of an MR that leaves unmerged). One GET; a missing MR or project still raises NotFound."""
    try:
        data = get_json(project.gl, _car_path(project, iid), what=f"read the train car of !{iid}")
    except NotFound as err:
        if "merge train" in _message(err).lower():  # "404 Merge Train Merge Request Not Found"
            return None
        raise
    return TrainCar.from_json(data)


class TrainOutcome(StrEnum):
    """What adding an MR to its merge train came to, and so what the caller does next."""

    ADDED = "added"  # on the train now: follow it until MERGED or DROPPED
    QUEUED = "queued"  # auto-merge set: GitLab adds it once its checks pass; follow it
    ALREADY = "already"  # on the train or queued before this call (a repeat): follow it
    MERGED = "merged"  # merged already
    HEAD_MOVED = "head_moved"  # the head is not the sha we approved: re-check the new head
    WAIT = "wait"  # not added for a reason that passes (GitLab checking, CI running, answer lost)
    NOT_MERGEABLE = "not_mergeable"  # not added: not approved, conflict, draft, CI failed, ...
    REFUSED = "refused"  # merge trains are off or not available here: merge without them


@dataclass(frozen=True)
class TrainResult:
    """The outcome of `add_to_train`, with what the caller needs to act on it."""

    outcome: TrainOutcome
    #: the MR's car when GitLab showed it (ADDED, ALREADY)
    car: TrainCar | None = None
    merge_commit_sha: str | None = None
    #: suggested seconds before calling again (WAIT)
    retry_in: float | None = None
    #: GitLab's word for it: its refusal message, the detailed_merge_status, the car's status
    detail: str = ""
    status_code: int | None = None
    #: the MR as read back after a refusal or a lost answer (None when not read): its
    #: detailed_merge_status says where NOT_MERGEABLE goes (e.g. `not_approved`: approve again)
    mr: MrView | None = None


def _settled(mr: MrView, sha: str) -> TrainResult | None:
    """The outcome the MR's state alone decides (merged, on another head), or None."""
    if mr.state == "merged":
        return TrainResult(
            TrainOutcome.MERGED, merge_commit_sha=mr.merged_sha, detail="merged", mr=mr
        )
    if mr.state == "closed":
        raise MrClosed(f"MR !{mr.iid} is closed; it cannot be merged")
    if mr.sha is not None and mr.sha != sha:
        return TrainResult(TrainOutcome.HEAD_MOVED, detail=f"head is {mr.sha}", mr=mr)
    return None


def _read_back(
    project: Project, iid: int, sha: str, *, repeat: bool, status_code: int | None
) -> tuple[MrView, TrainResult | None]:
    """Reads the MR (and, when it shows auto-merge set, its car): the outcome they settle, or
    None when nothing shows the MR on a train or queued for one. `repeat`: GitLab refused the
    add, so whatever shows was there before (ALREADY); else the add may have happened."""
    mr = read_mr(project, iid)
    settled = _settled(mr, sha)
    if settled is not None or not mr.auto_merge:
        return mr, settled
    car = train_car(project, iid)
    if repeat:
        outcome = TrainOutcome.ALREADY
    else:
        outcome = TrainOutcome.ADDED if car is not None else TrainOutcome.QUEUED
    detail = car.status if car is not None else "auto-merge set, waiting for checks"
    return mr, TrainResult(outcome, car=car, detail=detail, status_code=status_code, mr=mr)


def _classify(mr: MrView, status_code: int | None, message: str) -> TrainResult:
    """Why GitLab would not add the MR, read from the MR after the refusal."""
    status = mr.detailed_merge_status
    passing = status in WAIT_STATUSES or (
        status == "ci_must_pass"
        and (mr.head_pipeline_status is None or mr.head_pipeline_status in PIPELINE_RUNNING)
    )
    detail = f"{status or 'unknown'}: {message}"
    if passing:
        return TrainResult(
            TrainOutcome.WAIT,
            retry_in=WAIT_SECONDS,
            detail=detail,
            status_code=status_code,
            mr=mr,
        )
    return TrainResult(TrainOutcome.NOT_MERGEABLE, detail=detail, status_code=status_code, mr=mr)


def _our_car(body: Any, iid: int) -> TrainCar | None:
    """Our car in GitLab's answer to the add: the whole train of the target branch (one page,
    newest first, so a car just added is on it)."""
    rows = body if isinstance(body, list) else [body]
    cars = [TrainCar.from_json(row) for row in rows if isinstance(row, dict)]
    return next((car for car in cars if car.iid == iid), None)


def add_to_train(
    project: Project,
    iid: int,
    sha: str,
    *,
    mr: MrView | None = None,
    auto_merge: bool = True,
    squash: bool = False,
) -> TrainResult:
    """Adds MR `iid` to the merge train of its target branch if its head is still `sha`; never
    waits. GitLab merges it when its train pipeline passes and it is first: follow it with
    `follow_train`.

    `auto_merge` (sent as `auto_merge` on GitLab 17.11+, `when_pipeline_succeeds` before):
    an MR whose checks have not passed
    yet (pipeline running, approvals syncing) is accepted all the same and joins the train once
    they pass (QUEUED); without it such an MR is refused (WAIT or NOT_MERGEABLE). `mr`: the MR
    the caller has just read: merged, closed or on another head, no call is made.

    Calls: one POST (201 ADDED, 202 QUEUED); after a 409 sha mismatch or a 403 nothing more;
    after any other refusal, a lost answer or a 5xx, one read of the MR and, when it shows
    auto-merge set, one read of its car. 401 (may not merge into the target) and 404 raise, as
    a closed MR does (MrClosed); a 5xx that the read-back does not explain raises too.
    """
    extra = {"gitlab_project": str(project.id), "mr_iid": iid, "sha": sha}
    if mr is not None:
        settled = _settled(mr, sha)
        if settled is not None:
            return settled
    data: dict[str, Any] = {"sha": sha}
    if auto_merge:  # the parameter's name depends on the release (GET /version, read once)
        data.update(train_join_param(gitlab_version(project.gl)))
    if squash:
        data["squash"] = True
    what = f"add !{iid} to the merge train"
    try:
        status_code, body = post_answer(project.gl, _car_path(project, iid), what=what, data=data)
    except UnknownOutcome:
        # the add may have happened: look before anyone tries again
        after, found = _read_back(project, iid, sha, repeat=False, status_code=None)
        if found is not None:
            return found
        return TrainResult(
            TrainOutcome.WAIT, retry_in=WAIT_SECONDS, detail="add answer lost", mr=after
        )
    except GitLabUnavailable as err:
        if err.status_code is not None and err.status_code >= 500:
            _, found = _read_back(project, iid, sha, repeat=False, status_code=err.status_code)
            if found is not None:  # a 5xx may come after the add was done
                return found
        raise
    except GitLabConflict as err:
        message = _message(err)
        if "SHA does not match" in message:
            return TrainResult(TrainOutcome.HEAD_MOVED, detail=message, status_code=409)
        # "Merge request is already set to Auto-Merge" (on the train, or queued)
        return _refused(project, iid, sha, 409, message, extra)
    except GitLabRefused as err:
        message = _message(err)
        if err.status_code == 403:  # "403 Forbidden" when the licence has no merge trains
            return TrainResult(TrainOutcome.REFUSED, detail=message, status_code=403)
        if err.status_code is None or err.status_code in {401, 404}:
            raise
        if "not enabled" in message:  # "Merge trains are not enabled for this project"
            return TrainResult(TrainOutcome.REFUSED, detail=message, status_code=err.status_code)
        # "No available merge train strategy", "Failed to merge", "already set to Auto-Merge"
        return _refused(project, iid, sha, err.status_code, message, extra)
    if status_code == 202:
        log.info("queued for the merge train", extra=extra)
        return TrainResult(
            TrainOutcome.QUEUED, detail="auto-merge set, waiting for checks", status_code=202
        )
    car = _our_car(body, iid)
    log.info("added to the merge train", extra={**extra, "car": car.status if car else None})
    return TrainResult(
        TrainOutcome.ADDED,
        car=car,
        detail=car.status if car is not None else "added",
        status_code=status_code,
    )


def _refused(
    project: Project, iid: int, sha: str, status_code: int, message: str, extra: dict[str, Any]
) -> TrainResult:
    """A refusal read back: already on the train (or queued), merged, moved, or why not."""
    after, found = _read_back(project, iid, sha, repeat=True, status_code=status_code)
    result = found or _classify(after, status_code, message)
    log.info(
        "merge train add refused",
        extra={**extra, "status_code": status_code, "next": result.outcome},
    )
    return result


class TrainState(StrEnum):
    """Where an MR stands with its merge train, for a caller following it."""

    ON_TRAIN = "on_train"  # a car on the train, or being merged: poll again after retry_in
    QUEUED = "queued"  # auto-merge set, not on the train yet (its checks have not passed)
    MERGED = "merged"  # merged (by the train, or around it)
    DROPPED = "dropped"  # not on the train, no auto-merge: GitLab removed it (detail says why)
    HEAD_MOVED = "head_moved"  # off the train, and its head is not the sha we added


@dataclass(frozen=True)
class TrainProgress:
    """What `follow_train` saw: the state, the car and the MR when read, GitLab's reason."""

    state: TrainState
    car: TrainCar | None = None
    mr: MrView | None = None
    merge_commit_sha: str | None = None
    retry_in: float | None = None
    #: the car's status and pipeline, or why the MR left the train (GitLab's system note)
    detail: str = ""


def follow_train(project: Project, iid: int, sha: str | None = None) -> TrainProgress:
    """Where MR `iid` stands with its merge train now: the one read a step polls with.

    `sha`: the head that was added; an MR off the train on another head is HEAD_MOVED. A closed
    MR raises MrClosed.

    Calls: one read of the car; when it has none or is done, one read of the MR; when the MR
    left the train unmerged, one page of its notes for GitLab's reason. At most three.
    """
    car = train_car(project, iid)
    if car is not None and (car.active or car.merging):
        pipeline = car.pipeline_status or "not started"
        return TrainProgress(
            TrainState.ON_TRAIN,
            car=car,
            retry_in=FOLLOW_SECONDS,
            detail=f"{car.status}, pipeline {pipeline}",
        )
    mr = read_mr(project, iid)
    if mr.state == "merged":
        return TrainProgress(
            TrainState.MERGED, car=car, mr=mr, merge_commit_sha=mr.merged_sha, detail="merged"
        )
    if mr.state == "closed":
        raise MrClosed(f"MR !{mr.iid} is closed; it cannot be merged")
    if mr.state == "locked" or (car is not None and car.merged):  # merged a moment from now
        return TrainProgress(
            TrainState.ON_TRAIN, car=car, mr=mr, retry_in=WAIT_SECONDS, detail="merging"
        )
    if sha is not None and mr.sha is not None and mr.sha != sha:
        return TrainProgress(TrainState.HEAD_MOVED, mr=mr, detail=f"head is {mr.sha}")
    if mr.auto_merge:
        return TrainProgress(
            TrainState.QUEUED,
            mr=mr,
            retry_in=FOLLOW_SECONDS,
            detail=f"waiting for checks: {mr.detailed_merge_status or 'unknown'}",
        )
    return TrainProgress(TrainState.DROPPED, mr=mr, detail=_left_because(project, iid))


def _left_because(project: Project, iid: int) -> str:
    """GitLab's reason from the newest system note saying the MR left the train (one page)."""
    rows = get_list(
        project.gl,
        f"{project.mr_path(iid)}/notes",
        what=f"list comments of !{iid}",
        query={"sort": "desc", "order_by": "created_at"},
        limit=_NOTES_READ,
    )
    for note in (NoteView.from_json(row) for row in rows):
        for prefix in _LEFT_PREFIXES:
            if note.system and note.body.startswith(prefix):
                return note.body[len(prefix) :]
    return "not on the merge train"
