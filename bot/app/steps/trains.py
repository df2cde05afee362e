"""Whether a change merges through GitLab's merge trains (Premium and Ultimate) or through the
bot's own merge queue (bot/app/queue.py).

Asked once per change, when its merging starts, and shared: a project's answer read from GitLab
in the last TRAIN_KNOWN_FOR is reused by its other changes (no call). A change that uses the
train leaves the bot's queue (GitLab orders the merges), and is added to the train pinned to
its checked head, then followed until it merged or GitLab removed it (steps/perform.py).
"""

from __future__ import annotations

from datetime import timedelta

from bot.app.steps import StepContext
from bot.gitlab import Project, uses_merge_trains
from bot.store import queue
from bot.store.operations import known_merge_train, touch

#: How long one change's reading of its project's merge train setting serves the others.
TRAIN_KNOWN_FOR = timedelta(minutes=10)


def uses_trains(ctx: StepContext, project: Project) -> bool:
    """True when the change merges by its project's merge train (one GET, unless known)."""
    op = ctx.op
    if op.merge_train is not None:
        return op.merge_train
    engine = ctx.services.engine
    known = known_merge_train(engine, op.project, ctx.now - TRAIN_KNOWN_FOR)
    if known is None:
        uses = uses_merge_trains(project)
        touch(engine, op.id, merge_train=uses, merge_train_at=ctx.now)
    else:
        uses = known
        touch(engine, op.id, merge_train=uses)
    if uses:
        queue.drop(engine, op.id)  # GitLab's train orders this project's merges
    return uses
