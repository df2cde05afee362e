"""Doing what a step decided (bot/app/steps/decisions.py): the imperative shell around the
pure decisions of steps/decide.py. True when the operation moved, as every step returns."""

from __future__ import annotations

import logging
from typing import Any, assert_never

from bot.app.steps import StepContext
from bot.app.steps.common import advance
from bot.app.steps.decide import decide_approve, decide_merge
from bot.app.steps.decisions import (
    Advance,
    Approve,
    Later,
    Merge,
    Poll,
    Restart,
    StepDecision,
    StopChanged,
)
from bot.app.steps.integrity import stop_changed
from bot.app.steps.waits import deploy_deadline, drive_in, poll
from bot.core.events import Event
from bot.gitlab import GitLabError, MrClosed, approve_once, approved_by, merge
from bot.store.flags import get_flag
from bot.store.operations import touch

log = logging.getLogger(__name__)


def perform(ctx: StepContext, decision: StepDecision) -> bool:
    """Does `decision` for the step's operation; True when the operation moved."""
    match decision:
        case Advance(event, changes):
            if event is Event.MERGED:
                changes = {**changes, **deploy_deadline(ctx.services.settings, ctx.now)}
            return advance(ctx, event, **changes)
        case Poll(kind):
            if poll(ctx.services, ctx.op, kind, ctx.now):
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
        case Approve(sha, progress):
            return _approve(ctx, sha, progress)
        case Merge(sha, mr, progress):
            assert ctx.op.mr_iid is not None
            project = ctx.clients.author.project(ctx.op.gitlab_project)
            try:
                result = merge(project, ctx.op.mr_iid, sha, mr=mr)
            except MrClosed:
                return advance(ctx, Event.MR_CLOSED)
            return perform(ctx, decide_merge(ctx.op, result, sha, progress))
        case _:
            assert_never(decision)


def _approve(ctx: StepContext, sha: str, progress: dict[str, Any]) -> bool:
    """Approves `sha` as each approval bot that has not (each attempt's outcome decided by
    decide_approve); APPROVALS_GIVEN once all have."""
    op = ctx.op
    assert op.mr_iid is not None
    max_retries = int(get_flag(ctx.services.engine, "approval.max_retries"))
    impl = str(get_flag(ctx.services.engine, "approve.impl"))
    # counted in place, as ever: on the same head these are the operation's own lists, so a
    # transient failure part-way (retry_later writes op.progress) keeps who approved already
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
        decision = decide_approve(op, account.label, result, progress)
        if decision is not None:
            return perform(ctx, decision)
        approved.append(account.label)
    return advance(ctx, Event.APPROVALS_GIVEN, head_sha=sha, progress=progress)
