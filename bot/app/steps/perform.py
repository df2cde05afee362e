"""Doing what a step decided (bot/app/steps/decisions.py): the imperative shell around the
pure decisions of steps/decide.py. True when the operation moved, as every step returns."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, assert_never

from bot.app import policy
from bot.app.steps import StepContext
from bot.app.steps.common import advance, advance_made, short
from bot.app.steps.decide import (
    REBASE_ASKED,
    decide_approve,
    decide_merge,
    decide_train_add,
    decide_train_follow,
)
from bot.app.steps.decisions import (
    Advance,
    Approve,
    Later,
    LeaveTrain,
    Merge,
    Poll,
    Rebase,
    Restart,
    StepDecision,
    StopChanged,
)
from bot.app.steps.integrity import check_mr, stop_changed
from bot.app.steps.waits import deploy_deadline, drive_in, poll
from bot.core.events import Event
from bot.errors import CannotProceed
from bot.gitlab import (
    GitLabError,
    MrClosed,
    MrView,
    add_to_train,
    approve_once,
    approved_by,
    follow_train,
    merge,
    read_mr,
    rebase,
)
from bot.heartbeat import beat
from bot.store.flags import get_flag
from bot.store.operations import touch
from bot.store.queue import without_train

log = logging.getLogger(__name__)


def perform(ctx: StepContext, decision: StepDecision) -> bool:
    """Does `decision` for the step's operation; True when the operation moved."""
    match decision:
        case Advance(event, changes):
            if event is Event.MERGED:
                changes = {**changes, **deploy_deadline(ctx.services.settings, ctx.now, ctx.op)}
            return advance(ctx, event, **changes)
        case Poll(kind, why):
            if poll(ctx.services, ctx.op, kind, ctx.now, why):
                return False
            if kind == "pending":  # its slow re-reads are used up: an event or a person moves it
                return False
            return advance(ctx, Event.PIPELINE_TIMED_OUT, deadline_at=None)
        case Later(seconds, progress, pinned):
            drive_in(ctx.services, ctx.op, seconds, ctx.now, progress=progress, pinned=pinned)
            return False
        case Restart(why, progress, by_event):
            log.info("restarting approval: %s", why, extra={"operation_id": ctx.op.id})
            if by_event:
                return advance(ctx, Event.RETRY, progress=progress)
            touch(ctx.services.engine, ctx.op.id, progress=progress)
            drive_in(ctx.services, ctx.op, 1.0, ctx.now, progress=progress, pinned=False)
            return False
        case StopChanged(verdict):
            return stop_changed(ctx, verdict)
        case Approve(sha, progress, compared_at, read_first):
            return _approve(ctx, sha, progress, compared_at, read_first)
        case Rebase(sha, progress):
            assert ctx.op.mr_iid is not None
            project = ctx.clients.author.project(ctx.op.gitlab_project)
            result = rebase(project, ctx.op.mr_iid, _asking_to_rebase(ctx, sha, progress))
            return perform(ctx, decide_merge(ctx.op, result, sha, progress))
        case Merge(sha, mr, progress, approved_now) if ctx.op.merge_train:
            return _by_train(ctx, sha, mr, progress)
        case LeaveTrain(reason):
            log.info(
                "merging without the merge train: %s", reason, extra={"operation_id": ctx.op.id}
            )
            without_train(ctx.services.engine, ctx.op.id, ctx.now)
            drive_in(ctx.services, ctx.op, 1.0, ctx.now, pinned=False)
            return False
        case Merge(sha, mr, progress, approved_now):
            assert ctx.op.mr_iid is not None
            project = ctx.clients.author.project(ctx.op.gitlab_project)
            try:
                result = merge(
                    project,
                    ctx.op.mr_iid,
                    sha,
                    mr=mr,
                    approved_now=approved_now,
                    before_rebase=_asking_to_rebase(ctx, sha, progress),
                )
            except MrClosed:
                return advance(ctx, Event.MR_CLOSED)
            return perform(ctx, decide_merge(ctx.op, result, sha, progress))
        case _:
            assert_never(decision)


def _asking_to_rebase(ctx: StepContext, sha: str, progress: dict[str, Any]) -> Callable[[], None]:
    """What runs right before GitLab is asked to rebase from `sha`: a note in the operation's
    progress, so a worker that dies once GitLab queued the rebase (before REBASE_STARTED is
    recorded) leaves a change that follows it as the bot's own rebase, not a push."""

    def note() -> None:
        beat()  # a step that lost its lease stops here: nothing written, nothing asked
        touch(ctx.services.engine, ctx.op.id, progress={**progress, REBASE_ASKED: sha})

    return note


def _by_train(ctx: StepContext, sha: str, mr: MrView | None, progress: dict[str, Any]) -> bool:
    """GitLab's merge train merges it: added once (pinned to the checked head), then followed
    until it merged or GitLab removed it (steps/decide.py decide_train_add, _follow)."""
    op = ctx.op
    assert op.mr_iid is not None
    project = ctx.clients.author.project(op.gitlab_project)
    try:
        if progress.get("train") == sha:
            seen = follow_train(project, op.mr_iid, sha)
            return perform(ctx, decide_train_follow(op, seen, progress))
        added = add_to_train(project, op.mr_iid, sha, mr=mr)
    except MrClosed:
        return advance(ctx, Event.MR_CLOSED)
    return perform(ctx, decide_train_add(op, added, sha, progress))


def _approve(
    ctx: StepContext,
    sha: str,
    progress: dict[str, Any],
    compared_at: str | None = None,
    read_first: bool = True,
) -> bool:
    """Approves `sha` as each approval bot that has not (each attempt's outcome decided by
    decide_approve); APPROVALS_GIVEN once all have. The bots are those the recorded policy
    names (`approvals`), else all of them."""
    op = ctx.op
    iid = op.mr_iid
    assert iid is not None
    max_retries = int(get_flag(ctx.services.engine, "approval.max_retries"))
    impl = str(get_flag(ctx.services.engine, "approve.impl"))
    # counted in place, as ever: on the same head these are the operation's own lists, so a
    # transient failure part-way (retry_later writes op.progress) keeps who approved already
    tries: dict[str, int] = progress.setdefault("tries", {})
    approved: list[str] = progress.setdefault("approved", [])
    approvers: frozenset[str] | None = frozenset()
    if read_first:
        # one read of the approvals serves every account's read-first check (fail-open)
        try:
            approvers = frozenset(approved_by(ctx.clients.author.project(op.gitlab_project), iid))
        except GitLabError:
            approvers = None  # each account reads for itself then
    required = ctx.services.settings.approvals_required
    for account in policy.approver_accounts(ctx.clients.approvers, policy.of(op), required):
        if account.label in approved:
            continue
        attempt = tries.get(account.label, 0)
        result = approve_once(
            account,
            op.gitlab_project,
            iid,
            sha,
            attempt,
            max_retries,
            component=ctx.clients.approve,
            impl=impl,
            approvers=approvers,
        )
        tries[account.label] = attempt + 1
        decision = decide_approve(op, account.label, result, progress)
        if decision is not None:
            return perform(ctx, decision)
        approved.append(account.label)
    made = advance_made(ctx, Event.APPROVALS_GIVEN, head_sha=sha, progress=progress)
    if made is None:
        return False
    # approved on the head this step checked against the approval before approving: merge it
    # now, pinned to that head, once the MR as it is now is checked against the approved
    # identity again (the approve calls took time: a retarget or a target that moved shows
    # here, a push as a head that is not `sha`); the merge call never goes on an older read
    op = replace(
        ctx.op,
        version=made.version,
        step=made.step,
        head_sha=sha,
        verified_sha=sha,  # the check before approving verified it (and recorded it so)
        progress=progress,
        attempts=0,
    )
    after = replace(ctx, op=op)
    try:
        project = ctx.clients.author.project(op.gitlab_project)
        now = read_mr(project, iid)
        verdict = check_mr(after, project, now, compared_at=compared_at)
        if verdict.reasons:
            return stop_changed(after, verdict)
        perform(after, Merge(sha, now, progress, approved_now=True))
    except CannotProceed as exc:
        advance(after, Event.MERGE_ERROR, error_detail=short(exc))
    return True
