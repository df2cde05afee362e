"""Waiting without sleeping: a scheduled drive job plus a deadline stored on the operation."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from bot.approval.backoff import backoff
from bot.config import Settings
from bot.core.next_step import poll_interval
from bot.heartbeat import beat
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.services import Services
from bot.store.flags import get_flag
from bot.store.operations import OperationRow, touch

log = logging.getLogger(__name__)

#: A step that failed transiently (GitLab 5xx, a timeout) is retried after 1 s, doubling to a
#: 60 s cap: GitLab's failures are mostly blips, and a request should move within a minute of
#: GitLab answering again (a 300 s cap left requests idle for minutes after a run of 5xx).
STEP_BACKOFF_BASE = 1.0
STEP_BACKOFF_CAP = 60.0
#: Transient failures of one step in a row before it is failed: about two hours at the cap,
#: so a GitLab outage of that length fails nothing.
MAX_TRANSIENT = 120


def drive_in(
    services: Services,
    op: OperationRow,
    seconds: float,
    now: datetime,
    *,
    progress: dict[str, Any] | None = None,
    pinned: bool = True,
    deadline: bool = True,
) -> None:
    """Runs the operation's step again in `seconds`; the deadline covers a lost job.

    `pinned`: the job carries the operation's version, so it does nothing if an event moved the
    operation meanwhile (a late poll after the webhook changes nothing). `deadline=False`: no
    deadline (a pending wait's slow re-read: the sweep leaves a pending operation alone).
    """
    beat()  # a step that lost its lease stops here (LeaseLost) instead of rescheduling
    fields: dict[str, Any] = {
        "deadline_at": now + timedelta(seconds=seconds + services.settings.step_timeout)
        if deadline
        else None
    }
    if progress is not None:
        fields["progress"] = progress
    touch(services.engine, op.id, **fields)
    args: tuple[object, ...] = (op.id, op.version) if pinned else (op.id,)
    try:
        services.queue.enqueue_in(
            seconds, DRIVE_JOB, *args, job_id=f"later:{op.id}:{uuid.uuid4().hex[:12]}"
        )
    except QueueUnavailable:
        log.warning(
            "queue down: the sweep re-drives at the deadline", extra={"operation_id": op.id}
        )


def deploy_deadline(settings: Settings, now: datetime) -> dict[str, Any]:
    """What entering MERGED sets besides the state: the deadline of the wait for the deployment's
    word (GITOPS_DEPLOY_TIMEOUT); past it the sweep reports the change pending (DEPLOY_PENDING)."""
    return {"deadline_at": now + timedelta(seconds=settings.deploy_timeout)}


def new_wait(op: OperationRow) -> bool:
    """True when the operation has not started waiting in its current version yet."""
    wait = op.progress.get("wait") or {}
    return bool(wait.get("version") != op.version)


def poll(services: Services, op: OperationRow, kind: str, now: datetime) -> bool:
    """Schedules the next poll of a wait (`kind`: pipeline, rebase or pending); False when it
    timed out.

    Polls are tiered (the `poll.<kind>_tiers` flag, read per use) and the whole wait is bounded
    by GITOPS_PIPELINE_TIMEOUT; a pending wait by its tiers alone, with no deadline (it is
    pending on purpose: the sweep leaves it alone). A wait starts anew whenever the operation's
    version changes.
    """
    progress = dict(op.progress)
    wait = progress.get("wait") or {}
    if wait.get("version") != op.version or wait.get("kind") != kind:
        wait = {"version": op.version, "kind": kind, "polls": 0, "since": now.isoformat()}
    tiers = get_flag(services.engine, f"poll.{kind}_tiers")
    interval = poll_interval(tiers, int(wait["polls"]))
    elapsed = (now - datetime.fromisoformat(wait["since"])).total_seconds()
    pending = kind == "pending"
    if interval is None or (not pending and elapsed >= services.settings.pipeline_timeout):
        return False
    wait["polls"] = int(wait["polls"]) + 1
    progress["wait"] = wait
    drive_in(services, op, interval, now, progress=progress, deadline=not pending)
    return True


def retry_later(
    services: Services, op: OperationRow, now: datetime, retry_after: float | None = None
) -> bool:
    """Reschedules after a transient failure (backoff, never before Retry-After); False once
    the step has failed transiently too often.

    The streak belongs to the operation's version: once the operation moves, the next step's
    failures start from the first backoff and a whole budget again.
    """
    progress = dict(op.progress)
    streak = progress.get("transient")
    failures = (
        int(streak.get("failures", 0))
        if isinstance(streak, dict) and streak.get("version") == op.version
        else 0
    )
    if failures >= MAX_TRANSIENT:
        return False
    progress["transient"] = {"version": op.version, "failures": failures + 1}
    delay = max(backoff(failures, STEP_BACKOFF_BASE, STEP_BACKOFF_CAP), retry_after or 0.0)
    drive_in(services, op, delay, now, progress=progress, pinned=False)
    return True
