"""Handling phase: approve as each approval bot, merge pinned to the SHA, rebase and retry.

Before approving, and again before merging, the MR is checked against the approved change
identity (bot/app/steps/integrity.py); only the head that check verified is approved and merged.
Each step reads GitLab, decides with steps/decide.py and acts with steps/perform.py.
"""

from __future__ import annotations

from bot.app.steps import StepContext
from bot.app.steps.decide import (
    decide_finished,
    decide_handle,
    decide_rebase,
    needs_recheck,
)
from bot.app.steps.decisions import Poll
from bot.app.steps.integrity import check_mr
from bot.app.steps.perform import perform
from bot.app.steps.waits import new_wait
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
