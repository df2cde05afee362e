"""Handling phase: approve as each approval bot, merge pinned to the SHA, rebase and retry.

Only the head of the branch's merge queue goes on (bot/app/queue.py); the others wait in line
without calling GitLab. A project with GitLab's merge trains merges through them instead
(steps/trains.py).

Before approving, and again before merging, the MR is checked against the approved change
identity (bot/app/steps/integrity.py); only the head that check verified is approved and merged.
Each step reads GitLab, decides with steps/decide.py and acts with steps/perform.py.
"""

from __future__ import annotations

from dataclasses import replace

from bot.app.queue import wait_turn
from bot.app.steps import StepContext
from bot.app.steps.decide import (
    decide_checked_pipeline,
    decide_finished,
    decide_handle,
    decide_pipeline,
    decide_rebase,
    decide_unfollowed_rebase,
    head_pipeline,
    needs_recheck,
    rebases_first,
)
from bot.app.steps.decisions import Poll
from bot.app.steps.integrity import check_mr
from bot.app.steps.perform import perform
from bot.app.steps.trains import uses_trains
from bot.app.steps.waits import continues_wait, new_wait, newly_covered, superseded, waiting_for
from bot.core.states import BindingState
from bot.gitlab import RebaseState, head_pipeline_parents, read_mr, rebase_status


def handle(ctx: StepContext) -> bool:
    """Checks the MR against what was approved, approves as every approval bot that has not,
    then merges pinned to the checked head; each outcome to its state (steps/decide.py)."""
    op = ctx.op
    iid = op.mr_iid
    assert iid is not None
    project = ctx.clients.author.project(op.gitlab_project)
    if uses_trains(ctx, project):  # GitLab's merge train merges it
        ctx = replace(ctx, op=replace(op, merge_train=True))
    elif not wait_turn(ctx.services, op, ctx.now):
        return False  # not its turn: the change ahead in its branch's merge queue goes first
    op = ctx.op
    mr = read_mr(project, iid)
    finished = decide_finished(mr)
    if finished is None:  # a rebase asked for whose start is not recorded: follow it
        finished = decide_unfollowed_rebase(op)
    if finished is not None:
        return perform(ctx, finished)
    # a rebase is asked for before any approval or merge: the check before it need not read the
    # target branch's head (the checks before approving and merging do, on the rebased head)
    final = not rebases_first(op, mr)
    return perform(ctx, decide_handle(op, mr, check_mr(ctx, project, mr, final=final)))


def poll_rebase(ctx: StepContext) -> bool:
    """Follows GitLab's rebase, then the pipeline on the new head; then back to approving."""
    op = ctx.op
    assert op.mr_iid is not None
    if not op.merge_train and not wait_turn(ctx.services, op, ctx.now):
        return False  # another change was moved to the front meanwhile: it goes first
    if new_wait(op):  # GitLab rebases in the background: look after the first interval
        return perform(ctx, Poll("rebase"))
    if superseded(ctx):
        return False  # an MR event's look found the rebase done and rescheduled the wait
    covered = newly_covered(op)
    if covered is not None:  # webhooks come for this MR now: polls are the fallback
        return perform(ctx, Poll(covered)) if continues_wait(ctx) else False
    project = ctx.clients.author.project(op.gitlab_project)
    before = op.progress.get("rebase_from") or op.head_sha
    status = rebase_status(project, op.mr_iid, before_sha=before)
    if status.state is not RebaseState.DONE:
        decision = decide_rebase(status)
    else:
        mr = status.mr or read_mr(project, op.mr_iid)  # the poll's own read serves
        # the rebased head's content is verified; the pipeline's wait comes next, and the
        # check before approving reads the target branch's head
        verdict = check_mr(ctx, project, mr, final=False) if needs_recheck(op, mr) else None
        seen = head_pipeline(mr, head_pipeline_parents(project, mr))
        decision = decide_rebase(status, mr, verdict, seen)
    if isinstance(decision, Poll) and not continues_wait(ctx) and decision.kind == waiting_for(op):
        return False  # an MR event's extra look: the scheduled one still comes
    # (a look that found the rebase done starts the pipeline's wait, replacing the rebase's)
    return perform(ctx, decision)


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
            seen = head_pipeline(mr, head_pipeline_parents(project, mr))
            decision = decide_checked_pipeline(mr, verdict, "pending", seen=seen)
    else:
        decision = decide_pipeline(
            mr, "pending", head_pipeline(mr, head_pipeline_parents(project, mr))
        )
    if isinstance(decision, Poll) and not continues_wait(ctx):
        return False  # a nudge's extra look: the scheduled one still comes
    return perform(ctx, decision)
