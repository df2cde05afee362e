"""The merge queue at work (the line itself is bot/store/queue.py).

Only the head of a branch's line rebases, waits for its pipeline and merges; every other change
in MERGING waits without a GitLab call (`wait_turn`, at the top of the merging steps). When a
change leaves MERGING -- merged, failed, closed, cancelled -- whoever moved it calls `follow`,
which drives the next head at once and queues its status comment ("first in line"). Should that
drive be lost (a worker killed between the two, a Redis flush), a waiting change's own deadline
(`queue_recheck`: two sweep intervals) brings the sweep to it, and it finds itself at the head:
a database read, no GitLab call.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from bot.config import Settings
from bot.core.states import BindingState
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.services import Services
from bot.store import queue as line
from bot.store.fire import TransitionMade
from bot.store.models import utcnow
from bot.store.operations import OperationRow, touch

log = logging.getLogger(__name__)

#: The fewest seconds a change waits in line before the sweep looks at it again (queue_recheck).
QUEUE_RECHECK_MIN = 10.0


def queue_recheck(settings: Settings) -> float:
    """Seconds after which the sweep looks again at a change waiting in line (a database read):
    the fallback should the drive that follows its predecessor's exit be lost. Two sweep
    intervals (40 s with the default GITOPS_SWEEP_INTERVAL), at least QUEUE_RECHECK_MIN."""
    return max(2.0 * settings.sweep_interval, QUEUE_RECHECK_MIN)


def wait_turn(services: Services, op: OperationRow, now: datetime) -> bool:
    """True when the merging step may go on: the operation is its line's head, is paused on
    its own pipeline (pending), or is in no line (a policy file cannot turn the queue off).
    Otherwise it waits in line: no GitLab call, a deadline queue_recheck() away for the sweep,
    and False."""
    if op.state is not BindingState.MERGING:
        return True
    where = line.place(services.engine, op.id)
    if where is None or op.step in line.PAUSED_STEPS:
        return True
    line.mark_turn(services.engine, op.id, now, head=where.is_head)
    if where.is_head:
        return True
    touch(
        services.engine,
        op.id,
        deadline_at=now + timedelta(seconds=queue_recheck(services.settings)),
        attempts=0,
    )
    log.info(
        "waiting in line: %s of %s for %s",
        where.position,
        where.size,
        where.target_branch,
        extra={"operation_id": op.id},
    )
    return False


def follow(services: Services, made: TransitionMade | None) -> str | None:
    """After a transition: if it took a change out of MERGING -- or paused it, its pipeline
    wait gone pending -- the next in its line is driven now. The head driven, or None."""
    if made is None or made.old_state is not BindingState.MERGING:
        return None
    if made.new_state is BindingState.MERGING and made.step not in line.PAUSED_STEPS:
        return None
    key = line.line_of(services.engine, made.operation_id)
    return None if key is None else move_up(services, *key)


def move_up(
    services: Services, project: str, branch: str, now: datetime | None = None
) -> str | None:
    """Drives the line's head unless it is already going (and queues its status comment); the
    head driven, or None."""
    head = line.take_turn(services.engine, project, branch, now or utcnow())
    if head is None:
        return None
    try:
        services.queue.enqueue(DRIVE_JOB, head, job_id=f"queue:{head}:{uuid.uuid4().hex[:12]}")
    except QueueUnavailable:
        log.warning("queue down: the sweep drives the next in line", extra={"operation_id": head})
    log.info("first in line for %s", branch, extra={"operation_id": head})
    return head
