"""Handling phase: approve as each approval bot, merge pinned to the SHA, rebase and retry.

Before approving, and again before merging, the MR is checked against the approved change
identity (bot/app/steps/integrity.py); only the head that check verified is approved and merged.
Each step reads GitLab, decides with steps/decide.py and acts with steps/perform.py.
"""

from __future__ import annotations

from bot.app.steps import StepContext
from bot.app.steps.decide import (
    decide_checked_pipeline,
    decide_finished,
    decide_handle,
    decide_pipeline,
    decide_rebase,
    needs_recheck,
)
from bot.app.steps.decisions import Poll
from bot.app.steps.integrity import check_mr
from bot.app.steps.perform import perform
from bot.app.steps.waits import new_wait
from bot.core.states import BindingState
from bot.gitlab import RebaseState, read_mr, rebase_status


def handle(ctx: StepContext) -> bool:
    """Checks the MR against what was approved, approves as every approval bot that has not,
    then merges pinned to the checked head; each outcome to its state (steps/decide.py)."""
    op = ctx.op
    assert op.mr_iid is not None
    project = ctx.clients.author.project(op.gitlab_project)
    mr = read_mr(project, op.mr_iid)
    finished = decide_finished(mr)
    if finished is not None:
        return perform(ctx, finished)
    return perform(ctx, decide_handle(op, mr, check_mr(ctx, project, mr)))


def poll_rebase(ctx: StepContext) -> bool:
    """Follows GitLab's rebase, then the pipeline on the new head; then back to approving."""
    op = ctx.op
    assert op.mr_iid is not None
    if new_wait(op):  # GitLab rebases in the background: look after the first interval
        return perform(ctx, Poll("rebase"))
    project = ctx.clients.author.project(op.gitlab_project)
    before = op.progress.get("rebase_from") or op.head_sha
    status = rebase_status(project, op.mr_iid, before_sha=before)
    if status.state is not RebaseState.DONE:
        return perform(ctx, decide_rebase(status))
    mr = read_mr(project, op.mr_iid)
    verdict = check_mr(ctx, project, mr) if needs_recheck(op, mr) else None
    return perform(ctx, decide_rebase(status, mr, verdict))


def poll_pending(ctx: StepContext) -> bool:
    """A pipeline wait that outlived its poll tiers (pending): the MR is read again at a low
    rate (`poll.pending_tiers`), and at once when an MR event nudges it. The pipeline on the
    MR's head *now* decides -- after the bot's own rebase or a push alike; in handling, a head
    not verified before is first checked against the approval (a push stops the change).

    Calls: one MR read per look (plus the integrity check's, once, for a new head in handling).
    """
    op = ctx.op
    assert op.mr_iid is not None
    if new_wait(op):  # it just went pending: the first slow look after the first pending tier
        return perform(ctx, Poll("pending"))
    project = ctx.clients.author.project(op.gitlab_project)
    mr = read_mr(project, op.mr_iid)
    if op.state is BindingState.MERGING:
        decision = decide_finished(mr)
        if decision is None:
            verdict = check_mr(ctx, project, mr) if needs_recheck(op, mr) else None
            decision = decide_checked_pipeline(mr, verdict, "pending")
    else:
        decision = decide_pipeline(mr, "pending")
    if isinstance(decision, Poll) and not _continues_wait(ctx):
        return False  # a nudge's extra look: the scheduled one still comes
    return perform(ctx, decision)


def _continues_wait(ctx: StepContext) -> bool:
    """True when this run is the wait's scheduled poll (or its retry after a transient failure),
    so it schedules the next one; a nudge's run does not, or each nudge would add a chain."""
    streak = ctx.op.progress.get("transient")
    retrying = isinstance(streak, dict) and streak.get("version") == ctx.op.version
    return ctx.scheduled or retrying
