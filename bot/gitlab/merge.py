"""Merge (pinned to a sha) and rebase: a bounded number of calls, then an outcome for the caller.

`merge` never waits: it reads the MR, tries the merge once, and on a refusal reads the MR again
and says what to do next (wait and call again, poll the rebase it started, go back to approval,
re-check a moved head...). `detailed_merge_status` tells why GitLab refused (405 not mergeable yet,
406 conflicts on older GitLab, 409 sha mismatch, 422 "Branch cannot be merged").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from bot.core.pipelines import PipelineVerdict, judge_status
from bot.gitlab.calls import put_json
from bot.gitlab.client import Project
from bot.gitlab.errors import (
    GitLabConflict,
    GitLabRefused,
    GitLabUnavailable,
    MrClosed,
    UnknownOutcome,
)
from bot.gitlab.reads import read_mr
from bot.gitlab.views import MrView

log = logging.getLogger(__name__)

#: Suggested seconds before calling `merge` again after WAIT (the caller's schedule decides).
WAIT_SECONDS = 10.0
#: Suggested seconds before polling `rebase_status` after REBASE_STARTED.
REBASE_POLL_SECONDS = 5.0
#: Statuses that pass on their own: GitLab is still checking, CI runs, approvals sync,
#: external status checks have not all answered (`status_checks_must_pass`, Ultimate: a
#: failed one stays until retried, which the wait's deadline bounds), the MR's `merge_after`
#: has not come (`merge_time`, 17.5+) (MergeRequests::Mergeability::DetailedMergeStatusService;
#: app/services/merge_requests/mergeability/check_*_service.rb).
WAIT_STATUSES = frozenset(
    {
        "checking",
        "unchecked",
        "ci_still_running",
        "approvals_syncing",
        "preparing",
        "mergeable",
        "status_checks_must_pass",
        "merge_time",
    }
)
#: Refusals that no re-read can explain: the token may not merge, or the MR is gone.
_HARD_REFUSALS = frozenset({401, 403, 404})


class MergeOutcome(StrEnum):
    """What a merge attempt came to, and so what the caller does next."""

    MERGED = "merged"  # done (by this call or before it)
    WAIT = "wait"  # not mergeable yet; call merge again after retry_in
    REBASE_STARTED = "rebase_started"  # a rebase is queued or running; poll rebase_status
    REBASE_CONFLICT = "rebase_conflict"  # conflicts with the target: people must resolve them
    NOT_APPROVED = "not_approved"  # approvals missing: back to approving
    HEAD_MOVED = "head_moved"  # the head is not the sha we approved: re-check the new head
    BLOCKED = "blocked"  # refused for a reason the bot cannot fix (draft, discussions, CI failed)


@dataclass(frozen=True)
class MergeResult:
    """The outcome of `merge`, with what the caller needs to act on it."""

    outcome: MergeOutcome
    merge_commit_sha: str | None = None
    retry_in: float | None = None
    #: GitLab's word for it: the detailed_merge_status, merge_error or refusal text
    detail: str = ""
    status_code: int | None = None


def _merged(mr: MrView) -> MergeResult:
    return MergeResult(MergeOutcome.MERGED, merge_commit_sha=mr.merged_sha, detail="merged")


def _wait(detail: str, status_code: int | None = None) -> MergeResult:
    return MergeResult(
        MergeOutcome.WAIT, retry_in=WAIT_SECONDS, detail=detail, status_code=status_code
    )


#: Called right before GitLab is asked to rebase (the caller records that it asks, so a crash
#: after GitLab queued the rebase does not leave a rebased head nobody knows the bot asked for).
BeforeRebase = Callable[[], None] | None


def rebase(project: Project, iid: int, before: BeforeRebase = None) -> MergeResult:
    """Asks GitLab to rebase the source branch; 202 only means queued (poll rebase_status).
    `before` is called right before the call."""
    if before is not None:
        before()
    try:
        put_json(project.gl, f"{project.mr_path(iid)}/rebase", what=f"rebase !{iid}", data={})
    except UnknownOutcome:
        pass  # queued or not, rebase_status tells; merging again re-asks if it was lost
    except GitLabConflict as err:
        return _wait("rebase could not be queued", err.status_code)  # "failed to enqueue"
    log.info("rebase started", extra={"gitlab_project": str(project.id), "mr_iid": iid})
    return MergeResult(
        MergeOutcome.REBASE_STARTED, retry_in=REBASE_POLL_SECONDS, detail="need_rebase"
    )


def _settled(
    project: Project,
    mr: MrView,
    sha: str,
    *,
    approved_now: bool = False,
    before_rebase: BeforeRebase = None,
) -> MergeResult | None:
    """The outcome the MR's state alone decides, or None when only a merge attempt can tell.
    `approved_now`: the caller approved since `mr` was read, so its "not_approved" is stale."""
    if mr.state == "merged":
        return _merged(mr)
    if mr.state == "closed":
        raise MrClosed(f"MR !{mr.iid} is closed; it cannot be merged")
    if mr.state == "locked":
        return _wait("locked: a merge is running")
    if mr.sha is not None and mr.sha != sha:
        return MergeResult(MergeOutcome.HEAD_MOVED, detail=f"head is {mr.sha}")
    if mr.rebase_in_progress:
        return MergeResult(
            MergeOutcome.REBASE_STARTED, retry_in=REBASE_POLL_SECONDS, detail="rebase_in_progress"
        )
    status = mr.detailed_merge_status
    if status == "need_rebase":
        return rebase(project, mr.iid, before_rebase)
    if status == "conflict" or (status is None and mr.has_conflicts):
        return MergeResult(MergeOutcome.REBASE_CONFLICT, detail="conflict")
    if status == "not_approved" and not approved_now:
        return MergeResult(MergeOutcome.NOT_APPROVED, detail=status)
    return None


def _classify(
    project: Project, mr: MrView, sha: str, status_code: int, before_rebase: BeforeRebase = None
) -> MergeResult:
    """Why the merge was refused, read from the MR after the refusal, as the next step."""
    settled = _settled(project, mr, sha, before_rebase=before_rebase)
    if settled is not None:
        return settled
    status = mr.detailed_merge_status
    if status is None:  # GitLab older than 15.6: only the refusal's code tells
        if status_code == 406:
            return MergeResult(MergeOutcome.REBASE_CONFLICT, detail="conflict", status_code=406)
        if status_code == 422:  # "Branch cannot be merged": most often behind the target
            return rebase(project, mr.iid, before_rebase)
        return _wait(mr.merge_error or "not mergeable yet", status_code)
    if status in WAIT_STATUSES:
        return _wait(status, status_code)
    if status == "ci_must_pass":
        # judged as the pipeline waits judge it (bot/core/pipelines.py): `canceling`,
        # `waiting_for_callback` and `manual` are not final
        if judge_status(mr.head_pipeline_status) is PipelineVerdict.WAIT:
            return _wait(f"{status}: pipeline {mr.head_pipeline_status or 'not started'}")
        return MergeResult(
            MergeOutcome.BLOCKED,
            detail=f"{status}: pipeline {mr.head_pipeline_status}",
            status_code=status_code,
        )
    # draft_status, discussions_not_resolved, blocked_status, requested_changes, ...
    return MergeResult(MergeOutcome.BLOCKED, detail=status, status_code=status_code)


def merge(
    project: Project,
    iid: int,
    sha: str,
    *,
    mr: MrView | None = None,
    approved_now: bool = False,
    before_rebase: BeforeRebase = None,
) -> MergeResult:
    """Merges MR `iid` if its head is still `sha` (removing the source branch); never waits.

    Calls: one read (none when the caller passes the MR it has just read and checked); then at
    most one merge and one re-read, or one rebase request. `approved_now`: the caller's
    approvals came after it read `mr` (its "not_approved" is not held against the merge; a
    refusal is read again and classified as ever). `before_rebase` is called right before a
    rebase is asked for (a rebase starts from `sha`).
    """
    extra = {"gitlab_project": str(project.id), "mr_iid": iid, "sha": sha}
    settled = _settled(
        project,
        mr if mr is not None else read_mr(project, iid),
        sha,
        approved_now=approved_now,
        before_rebase=before_rebase,
    )
    if settled is not None:
        return settled
    data = {"sha": sha, "should_remove_source_branch": True}
    try:
        answer = put_json(
            project.gl, f"{project.mr_path(iid)}/merge", what=f"merge !{iid}", data=data
        )
    except UnknownOutcome:
        # the merge may have happened: look before anyone tries again
        after = read_mr(project, iid)
        return _merged(after) if after.state == "merged" else _wait("merge answer lost")
    except GitLabUnavailable as err:
        if err.status_code is not None and err.status_code >= 500:
            after = read_mr(project, iid)  # a 5xx may come after the merge was done
            if after.state == "merged":
                return _merged(after)
        raise
    except GitLabConflict as err:
        return MergeResult(MergeOutcome.HEAD_MOVED, detail=str(err), status_code=err.status_code)
    except GitLabRefused as err:
        if err.status_code is None or err.status_code in _HARD_REFUSALS:
            raise
        result = _classify(project, read_mr(project, iid), sha, err.status_code, before_rebase)
        log.info(
            "merge refused", extra={**extra, "status_code": err.status_code, "next": result.outcome}
        )
        return result
    if answer.get("state") == "merged":
        return _merged(MrView.from_json(answer))
    # accepted but not merged yet (newer GitLab merges asynchronously): confirm by reading
    after = read_mr(project, iid)
    return _merged(after) if after.state == "merged" else _wait("merge accepted, not merged yet")


class RebaseState(StrEnum):
    """Where a rebase GitLab was asked for stands."""

    IN_PROGRESS = "in_progress"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class RebaseStatus:
    """The state of the MR's rebase, its new head, and GitLab's merge_error when it failed."""

    state: RebaseState
    sha: str | None
    merge_error: str | None = None
    #: the MR as this poll read it (the caller needs no second read)
    mr: MrView | None = None


def rebase_status(project: Project, iid: int, *, before_sha: str | None = None) -> RebaseStatus:
    """Polls the rebase (one read). `before_sha`: the head before it; a new head means done.

    A rebase that failed shows only as `merge_error` (conflicts): the caller's REBASE_CONFLICT.
    """
    mr = read_mr(project, iid)
    if mr.rebase_in_progress:
        return RebaseStatus(RebaseState.IN_PROGRESS, mr.sha, mr=mr)
    if before_sha is not None and mr.sha != before_sha:
        # a merge_error left would be an old one
        return RebaseStatus(RebaseState.DONE, mr.sha, mr=mr)
    if mr.merge_error:
        return RebaseStatus(RebaseState.FAILED, mr.sha, mr.merge_error, mr=mr)
    return RebaseStatus(RebaseState.DONE, mr.sha, mr=mr)
