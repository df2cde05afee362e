"""The workflow steps' decisions as pure functions: facts already read (the operation, the MR,
a merge or rebase result, the integrity verdict) in, a StepDecision out; no I/O, no clock.

The step modules (creation.py, handling.py) read GitLab, call these, and hand the decision to
perform.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, assert_never

from bot.app.steps.decisions import (
    Advance,
    Approve,
    Later,
    LeaveTrain,
    Merge,
    Poll,
    PollKind,
    Rebase,
    Restart,
    StepDecision,
    StopChanged,
    Verdict,
)
from bot.core.events import Event
from bot.core.pipelines import FAILED_STATUSES, PipelineVerdict, judge
from bot.core.states import Step
from bot.gitlab.approve import ApproveOutcome, ApproveResult
from bot.gitlab.merge import WAIT_SECONDS, MergeOutcome, MergeResult, RebaseState, RebaseStatus
from bot.gitlab.trains import FOLLOW_SECONDS, TrainOutcome, TrainProgress, TrainResult, TrainState
from bot.gitlab.views import MrView

if TYPE_CHECKING:
    from bot.store.operations import OperationRow

#: Times the head may move or approvals reset under one operation before it stops.
MAX_RESTARTS = 5
#: Head pipeline statuses that fail the change's checks (bot/core/pipelines.py judges).
FAILED_PIPELINE = FAILED_STATUSES
#: The progress key the handling step writes right before it asks GitLab to rebase: the
#: verified head the rebase starts from. REBASE_STARTED (`rebase_from`) replaces it once recorded.
REBASE_ASKED = "rebase_asked"


def head_pipeline(mr: MrView, merge_parents: tuple[str, ...] = ()) -> PipelineVerdict:
    """The MR's head pipeline as read, judged for the MR's head (`merge_parents`: the parents
    of the commit it ran on, when that is not the head: a merged results pipeline's)."""
    return judge(mr.head_pipeline_status, mr.head_pipeline_sha, mr.sha, merge_parents)


def decide_pipeline(
    mr: MrView, kind: PollKind = "pipeline", seen: PipelineVerdict | None = None
) -> StepDecision:
    """The MR's head pipeline, as just read: passed, failed, closed MR, or look again (`kind`:
    the wait's tiers, "pending" once it outlived them). `seen`: the head pipeline judged for
    the head (a pipeline of an older head, not attached yet, is no verdict: look again)."""
    if mr.state == "closed":
        return Advance(Event.MR_CLOSED)
    seen = head_pipeline(mr) if seen is None else seen
    if seen is PipelineVerdict.PASSED:
        return Advance(Event.PIPELINE_PASSED, {"head_sha": mr.sha})
    if seen is PipelineVerdict.FAILED:
        return Advance(
            Event.PIPELINE_FAILED,
            {
                "head_sha": mr.sha,
                "error_detail": f"MR pipeline {mr.head_pipeline_id} {mr.head_pipeline_status}",
            },
        )
    return Poll(kind)


def decide_finished(mr: MrView) -> StepDecision | None:
    """A merged or closed MR ends handling; None when it is open (check it, then act)."""
    if mr.state == "merged":
        return Advance(Event.MERGED, {"merge_commit_sha": mr.merged_sha})
    if mr.state == "closed":
        return Advance(Event.MR_CLOSED)
    return None


def rebases_first(op: OperationRow, mr: MrView) -> bool:
    """Whether handling the MR as read starts with a rebase, not an approval or a merge: it is
    behind its target (a fast-forward project after another merge) and not approved on this
    head yet -- approving first would be done again on the rebased head."""
    approved = op.step is Step.HANDLE_APPROVED and op.progress.get("sha") == mr.sha
    return not approved and mr.detailed_merge_status == "need_rebase" and not mr.rebase_in_progress


def decide_handle(op: OperationRow, mr: MrView, verdict: Verdict) -> StepDecision:
    """The open MR checked against the approved change: stop, approve the checked head (a new
    head starts its approvals afresh), or -- approved on that head -- merge it; a head GitLab
    says is behind its target is rebased before it is approved."""
    if not verdict.ok:
        return StopChanged(verdict)
    sha = verdict.head
    progress: dict[str, Any] = dict(op.progress)
    if op.step is Step.HANDLE_APPROVED and progress.get("sha") == sha:
        return Merge(sha, mr, progress)
    if rebases_first(op, mr):
        return Rebase(sha, progress)
    if progress.get("sha") != sha:  # a new head needs new approvals
        progress = {
            "sha": sha,
            "approved": [],
            "tries": {},
            "restarts": int(progress.get("restarts", 0)),
        }
    # GitLab saying "not approved" on a head no account tried yet: no approval of ours to
    # find first (after the bot's own rebase GitLab keeps them, and says so: then they are read)
    fresh = mr.detailed_merge_status == "not_approved" and not progress.get("tries")
    return Approve(sha, progress, verdict.target, read_first=not fresh)


def decide_unfollowed_rebase(op: OperationRow) -> StepDecision | None:
    """A rebase the handling step asked GitLab for from the verified head, whose start was never
    recorded (the worker died, or lost its lease, after asking): it is followed as the bot's own
    rebase (REBASE_STARTED, then the rebase polls, which check the new head against the
    approval) instead of its new head being taken for a push. None when there is none."""
    asked = op.progress.get(REBASE_ASKED)
    if asked is None or asked != op.verified_sha:
        return None
    progress = {k: v for k, v in op.progress.items() if k != REBASE_ASKED}
    return Advance(Event.REBASE_STARTED, {"progress": {**progress, "rebase_from": asked}})


def decide_approve(
    op: OperationRow, account: str, result: ApproveResult, progress: dict[str, Any]
) -> StepDecision | None:
    """One approval bot's approve attempt; None when its approval is in place (go on)."""
    match result.outcome:
        case ApproveOutcome.APPROVED | ApproveOutcome.ALREADY:
            return None
        case ApproveOutcome.RETRY:
            return Later(result.retry_in or 1.0, progress)
        case ApproveOutcome.HEAD_MOVED:
            return decide_restart(op, progress, "the head moved while approving")
        case ApproveOutcome.FAILED:
            return Advance(
                Event.APPROVE_ERROR, {"error_detail": f"{account}: {result.reason}"[:500]}
            )
        case _:
            assert_never(result.outcome)


def decide_merge(
    op: OperationRow, result: MergeResult, sha: str, progress: dict[str, Any]
) -> StepDecision:
    """What a merge pinned to `sha` came to, to its state."""
    match result.outcome:
        case MergeOutcome.MERGED:
            return Advance(Event.MERGED, {"merge_commit_sha": result.merge_commit_sha})
        case MergeOutcome.REBASE_STARTED:
            return Advance(Event.REBASE_STARTED, {"progress": {**progress, "rebase_from": sha}})
        case MergeOutcome.REBASE_CONFLICT:
            return Advance(Event.REBASE_CONFLICT, {"error_detail": result.detail})
        case MergeOutcome.BLOCKED:
            return Advance(
                Event.MERGE_ERROR, {"error_detail": f"GitLab refuses to merge: {result.detail}"}
            )
        case MergeOutcome.WAIT:
            # GitLab still checking, CI running, checks or merge_after pending: no event says
            # when; the status comment says what GitLab waits for
            return Poll("merge", result.detail)
        case MergeOutcome.NOT_APPROVED | MergeOutcome.HEAD_MOVED:
            return decide_restart(op, progress, f"merge said {result.outcome.value}")
        case _:
            assert_never(result.outcome)


def decide_train_add(
    op: OperationRow, result: TrainResult, sha: str, progress: dict[str, Any]
) -> StepDecision:
    """What adding the MR to its merge train (pinned to `sha`) came to: follow the car, merged,
    re-check a moved head, wait, stop, or merge without the train."""
    match result.outcome:
        case TrainOutcome.ADDED | TrainOutcome.QUEUED | TrainOutcome.ALREADY:
            return Later(FOLLOW_SECONDS, {**progress, "train": sha})
        case TrainOutcome.MERGED:
            return Advance(Event.MERGED, {"merge_commit_sha": result.merge_commit_sha})
        case TrainOutcome.HEAD_MOVED:
            return decide_restart(op, progress, "the head moved before the merge train took it")
        case TrainOutcome.WAIT:
            return Later(result.retry_in or WAIT_SECONDS, progress)
        case TrainOutcome.NOT_MERGEABLE:
            status = result.mr.detailed_merge_status if result.mr is not None else None
            if status == "not_approved":
                return decide_restart(op, progress, "the merge train says it is not approved")
            if status == "conflict":
                return Advance(Event.REBASE_CONFLICT, {"error_detail": "conflict"})
            return Advance(
                Event.MERGE_ERROR,
                {"error_detail": f"GitLab would not add it to the merge train: {result.detail}"},
            )
        case TrainOutcome.REFUSED:
            return LeaveTrain(result.detail or "merge trains are not available")
        case _:
            assert_never(result.outcome)


def decide_train_follow(
    op: OperationRow, seen: TrainProgress, progress: dict[str, Any]
) -> StepDecision:
    """The MR's car as just followed: still on the train, merged, or dropped (GitLab's reason)."""
    match seen.state:
        case TrainState.ON_TRAIN | TrainState.QUEUED:
            return Poll("train")
        case TrainState.MERGED:
            return Advance(Event.MERGED, {"merge_commit_sha": seen.merge_commit_sha})
        case TrainState.DROPPED:
            return Advance(
                Event.MERGE_ERROR,
                {"error_detail": f"GitLab removed it from the merge train: {seen.detail}"[:500]},
            )
        case TrainState.HEAD_MOVED:
            return decide_restart(op, progress, "the head moved while it was on the merge train")
        case _:
            assert_never(seen.state)


def decide_restart(op: OperationRow, progress: dict[str, Any], why: str) -> StepDecision:
    """Approving starts again on the current head, at most MAX_RESTARTS times; then MERGE_ERROR."""
    restarts = int(progress.get("restarts", 0)) + 1
    if restarts > MAX_RESTARTS:
        return Advance(Event.MERGE_ERROR, {"error_detail": f"{why}, {MAX_RESTARTS} times"})
    return Restart(why, {"restarts": restarts}, by_event=op.step is Step.HANDLE_APPROVED)


def needs_recheck(op: OperationRow, mr: MrView) -> bool:
    """True when the rebased head is not the one verified: check it against the approval."""
    return mr.sha != op.verified_sha


def decide_rebase(
    status: RebaseStatus,
    mr: MrView | None = None,
    verdict: Verdict | None = None,
    seen: PipelineVerdict | None = None,
) -> StepDecision:
    """GitLab's rebase, then the pipeline on the new head. `mr`: read once the rebase is done;
    `verdict`: the new head checked against the approval (None when it was verified before)."""
    match status.state:
        case RebaseState.FAILED:
            return Advance(
                Event.REBASE_CONFLICT, {"error_detail": status.merge_error or "conflict"}
            )
        case RebaseState.IN_PROGRESS:
            return Poll("rebase")
        case RebaseState.DONE:
            if mr is None:
                raise ValueError("a finished rebase is decided on the MR read after it")
        case _:
            assert_never(status.state)
    # rebased: what is left is the new head's pipeline, a pipeline wait (its tiers)
    return decide_checked_pipeline(mr, verdict, "pipeline", " after the rebase", seen)


def decide_checked_pipeline(
    mr: MrView,
    verdict: Verdict | None,
    kind: PollKind,
    after: str = "",
    seen: PipelineVerdict | None = None,
) -> StepDecision:
    """Handling waits for the pipeline on the MR's head as just read (after the bot's rebase,
    or a wait gone pending): `verdict` is that head checked against the approval (None when it
    was verified before). A head that is not the approved change stops it, whatever its
    pipeline says; else passed, failed, or look again after `kind`'s next tier."""
    # a rebase moves the base, not the change: the new head must still be the approved change,
    # or nothing more is approved or merged
    if verdict is not None and not verdict.ok:
        return StopChanged(verdict)
    seen = head_pipeline(mr) if seen is None else seen
    if seen is PipelineVerdict.PASSED:
        return Advance(Event.PIPELINE_PASSED, {"head_sha": mr.sha, "progress": {}})
    if seen is PipelineVerdict.FAILED:
        return Advance(
            Event.PIPELINE_FAILED,
            {
                "head_sha": mr.sha,
                "error_detail": f"MR pipeline {mr.head_pipeline_id} "
                f"{mr.head_pipeline_status}{after}",
            },
        )
    return Poll(kind)
