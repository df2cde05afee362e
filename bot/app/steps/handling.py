"""Handling phase: approve as each approval bot, merge pinned to the SHA, rebase and retry.

Before approving, and again before merging, the MR is checked against the approved change
identity (bot/app/steps/integrity.py); only the head that check verified is approved and merged.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.app.steps import StepContext
from bot.app.steps.common import advance
from bot.app.steps.integrity import check_mr, stop_changed
from bot.app.steps.waits import drive_in, new_wait, poll
from bot.core.events import Event
from bot.core.states import Step
from bot.gitlab import (
    ApproveOutcome,
    GitLabError,
    MergeOutcome,
    MrClosed,
    RebaseState,
    approve_once,
    approved_by,
    merge,
    read_mr,
    rebase_status,
)
from bot.store.flags import get_flag
from bot.store.operations import touch

log = logging.getLogger(__name__)

#: Times the head may move or approvals reset under one operation before it stops.
MAX_RESTARTS = 5


def handle(ctx: StepContext) -> bool:
    """Checks the MR against what was approved, approves as every approval bot that has not,
    then merges pinned to the checked head; each outcome to its state."""
    op, services = ctx.op, ctx.services
    assert op.mr_iid is not None
    project = ctx.clients.author.project(op.gitlab_project)
    progress: dict[str, Any] = dict(op.progress)
    mr = read_mr(project, op.mr_iid)
    if mr.state == "merged":
        return advance(ctx, Event.MERGED, merge_commit_sha=mr.merged_sha)
    if mr.state == "closed":
        return advance(ctx, Event.MR_CLOSED)
    verdict = check_mr(ctx, project, mr)
    if not verdict.ok:
        return stop_changed(ctx, verdict)
    sha = verdict.head
    if op.step is not Step.HANDLE_APPROVED or progress.get("sha") != sha:
        if progress.get("sha") != sha:  # a new head needs new approvals
            progress = {
                "sha": sha,
                "approved": [],
                "tries": {},
                "restarts": int(progress.get("restarts", 0)),
            }
        stopped = _approve_all(ctx, sha, progress)
        if stopped is not None:
            return stopped
        return advance(ctx, Event.APPROVALS_GIVEN, head_sha=sha, progress=progress)
    try:
        result = merge(project, op.mr_iid, sha, mr=mr)
    except MrClosed:
        return advance(ctx, Event.MR_CLOSED)
    match result.outcome:
        case MergeOutcome.MERGED:
            return advance(ctx, Event.MERGED, merge_commit_sha=result.merge_commit_sha)
        case MergeOutcome.REBASE_STARTED:
            progress["rebase_from"] = sha
            return advance(ctx, Event.REBASE_STARTED, progress=progress)
        case MergeOutcome.REBASE_CONFLICT:
            return advance(ctx, Event.REBASE_CONFLICT, error_detail=result.detail)
        case MergeOutcome.BLOCKED:
            return advance(
                ctx, Event.MERGE_ERROR, error_detail=f"GitLab refuses to merge: {result.detail}"
            )
        case MergeOutcome.WAIT:
            if poll(services, op, "pipeline", ctx.now):
                return False
            return advance(ctx, Event.PIPELINE_TIMED_OUT, deadline_at=None)
        case MergeOutcome.NOT_APPROVED | MergeOutcome.HEAD_MOVED:
            return _restart(ctx, progress, f"merge said {result.outcome.value}")


def _approve_all(ctx: StepContext, sha: str, progress: dict[str, Any]) -> bool | None:
    """None when every approval bot has approved `sha`; else what handle() returns now."""
    op = ctx.op
    assert op.mr_iid is not None
    max_retries = int(get_flag(ctx.services.engine, "approval.max_retries"))
    impl = str(get_flag(ctx.services.engine, "approve.impl"))
    tries: dict[str, int] = progress.setdefault("tries", {})
    approved: list[str] = progress.setdefault("approved", [])
    # one read of the approvals serves every account's read-first check (fail-open)
    try:
        approvers: frozenset[str] | None = frozenset(
            approved_by(ctx.clients.author.project(op.gitlab_project), op.mr_iid)
        )
    except GitLabError:
        approvers = None  # each account reads for itself then
    for account in ctx.clients.approvers:
        if account.label in approved:
            continue
        attempt = tries.get(account.label, 0)
        result = approve_once(
            account,
            op.gitlab_project,
            op.mr_iid,
            sha,
            attempt,
            max_retries,
            component=ctx.clients.approve,
            impl=impl,
            approvers=approvers,
        )
        tries[account.label] = attempt + 1
        match result.outcome:
            case ApproveOutcome.APPROVED | ApproveOutcome.ALREADY:
                approved.append(account.label)
            case ApproveOutcome.RETRY:
                drive_in(ctx.services, op, result.retry_in or 1.0, ctx.now, progress=progress)
                return False
            case ApproveOutcome.HEAD_MOVED:
                return _restart(ctx, progress, "the head moved while approving")
            case ApproveOutcome.FAILED:
                return advance(
                    ctx, Event.APPROVE_ERROR, error_detail=f"{account.label}: {result.reason}"[:500]
                )
    return None


def _restart(ctx: StepContext, progress: dict[str, Any], why: str) -> bool:
    """Starts approving again on the current head, a bounded number of times."""
    restarts = int(progress.get("restarts", 0)) + 1
    if restarts > MAX_RESTARTS:
        return advance(ctx, Event.MERGE_ERROR, error_detail=f"{why}, {MAX_RESTARTS} times")
    log.info("restarting approval: %s", why, extra={"operation_id": ctx.op.id})
    fresh = {"restarts": restarts}
    if ctx.op.step is Step.HANDLE_APPROVED:
        return advance(ctx, Event.RETRY, progress=fresh)
    touch(ctx.services.engine, ctx.op.id, progress=fresh)
    drive_in(ctx.services, ctx.op, 1.0, ctx.now, progress=fresh, pinned=False)
    return False


def poll_rebase(ctx: StepContext) -> bool:
    """Follows GitLab's rebase, then the pipeline on the new head; then back to approving."""
    op = ctx.op
    assert op.mr_iid is not None
    if new_wait(op):  # GitLab rebases in the background: look after the first interval
        return not poll(ctx.services, op, "rebase", ctx.now) and advance(
            ctx, Event.PIPELINE_TIMED_OUT, deadline_at=None
        )
    project = ctx.clients.author.project(op.gitlab_project)
    before = op.progress.get("rebase_from") or op.head_sha
    status = rebase_status(project, op.mr_iid, before_sha=before)
    if status.state is RebaseState.FAILED:
        return advance(ctx, Event.REBASE_CONFLICT, error_detail=status.merge_error or "conflict")
    if status.state is RebaseState.DONE:
        mr = read_mr(project, op.mr_iid)
        if mr.sha != op.verified_sha:
            # a rebase moves the base, not the change: the new head must still be the approved
            # change, or nothing more is approved or merged
            verdict = check_mr(ctx, project, mr)
            if not verdict.ok:
                return stop_changed(ctx, verdict)
        if mr.head_pipeline_status == "success":
            return advance(ctx, Event.PIPELINE_PASSED, head_sha=mr.sha, progress={})
        if mr.head_pipeline_status in {"failed", "canceled", "skipped"}:
            return advance(
                ctx,
                Event.PIPELINE_FAILED,
                head_sha=mr.sha,
                error_detail=f"MR pipeline {mr.head_pipeline_id} "
                f"{mr.head_pipeline_status} after the rebase",
            )
    if poll(ctx.services, op, "rebase", ctx.now):
        return False
    return advance(ctx, Event.PIPELINE_TIMED_OUT, deadline_at=None)
