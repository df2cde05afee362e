"""Waiting without sleeping: a scheduled drive job plus a deadline stored on the operation."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from bot.app import policy
from bot.app.steps import StepContext
from bot.app.steps.decisions import PollKind
from bot.approval.backoff import backoff
from bot.config import Settings
from bot.core.next_step import poll_interval
from bot.heartbeat import beat
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.services import Services
from bot.store.commands import queue_status_comment
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
    token: str | None = None,
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
    if pinned and token is not None:
        args = (*args, token)
    try:
        services.queue.enqueue_in(
            seconds, DRIVE_JOB, *args, job_id=f"later:{op.id}:{uuid.uuid4().hex[:12]}"
        )
    except QueueUnavailable:
        log.warning(
            "queue down: the sweep re-drives at the deadline", extra={"operation_id": op.id}
        )


def deploy_deadline(settings: Settings, now: datetime, op: OperationRow) -> dict[str, Any]:
    """What entering MERGED sets besides the state: the deadline of the wait for the deployment's
    word (the recorded policy's `deploy.timeout`, else GITOPS_DEPLOY_TIMEOUT); past it the sweep
    reports the change pending (DEPLOY_PENDING)."""
    seconds = policy.deploy_timeout(settings, policy.of(op))
    return {"deadline_at": now + timedelta(seconds=seconds)}


def _wait_now(op: OperationRow) -> dict[str, Any] | None:
    """The operation's wait in its current version (None: it has not started one yet)."""
    wait = op.progress.get("wait")
    return wait if isinstance(wait, dict) and wait.get("version") == op.version else None


def new_wait(op: OperationRow) -> bool:
    """True when the operation has not started waiting in its current version yet."""
    return _wait_now(op) is None


def newly_covered(op: OperationRow) -> PollKind | None:
    """The kind of the operation's wait when it was scheduled by its short tiers and a pipeline
    webhook for the MR has arrived since: the webhook will move it, so the look due now is
    skipped and the fallback tiers (`poll.covered_tiers`) take over. None otherwise."""
    wait = _wait_now(op)
    if wait is None or wait.get("covered") or op.pipeline_hook_at is None:
        return None
    kind = wait.get("kind")
    return "pipeline" if kind == "pipeline" else "rebase" if kind == "rebase" else None


def waiting_for(op: OperationRow) -> str | None:
    """The kind of wait the operation is in, in its current version (None: none yet)."""
    kind = (_wait_now(op) or {}).get("kind")
    return kind if isinstance(kind, str) else None


def superseded(ctx: StepContext) -> bool:
    """True when this run is a poll of a chain a later look replaced (it rescheduled the wait,
    e.g. on a new kind): the wait holds another poll's token, so this one does nothing."""
    wait = _wait_now(ctx.op)
    if ctx.token is None or wait is None:
        return False
    return wait.get("token") not in (None, ctx.token)


def continues_wait(ctx: StepContext) -> bool:
    """True when this run is the wait's scheduled poll (or its retry after a transient failure),
    so it schedules the next one; a nudge's run does not, or each nudge would add a chain."""
    streak = ctx.op.progress.get("transient")
    retrying = isinstance(streak, dict) and streak.get("version") == ctx.op.version
    return ctx.scheduled or retrying


def poll(
    services: Services, op: OperationRow, kind: str, now: datetime, why: str | None = None
) -> bool:
    """Schedules the next poll of a wait (`kind`: pipeline, rebase or pending); False when it
    timed out. `why`: what GitLab said the wait is for; when it is new, the status comment is
    re-rendered to say it.

    Polls are tiered (the recorded policy's `poll.<kind>_tiers`, else the flag, read per use;
    `poll.covered_tiers` once pipeline webhooks are known to arrive for the MR) and the whole
    wait is bounded
    by GITOPS_PIPELINE_TIMEOUT; a pending wait by its tiers alone, with no deadline (it is
    pending on purpose: the sweep leaves it alone). A wait starts anew whenever the operation's
    version changes.
    """
    progress = dict(op.progress)
    wait = progress.get("wait") or {}
    tiers_name = _tiers_for(op, kind)
    covered = tiers_name.startswith("covered")
    if wait.get("version") != op.version or wait.get("kind") != kind:
        wait = {"version": op.version, "kind": kind, "polls": 0, "since": now.isoformat()}
    if bool(wait.get("covered")) != covered:  # webhooks seen: the fallback tiers from here
        wait = {**wait, "polls": 0, "covered": covered}
    tiers = policy.poll_tiers(
        policy.of(op), tiers_name, get_flag(services.engine, f"poll.{tiers_name}_tiers")
    )
    interval = poll_interval(tiers, int(wait["polls"]))
    elapsed = (now - datetime.fromisoformat(wait["since"])).total_seconds()
    pending = kind == "pending"
    if interval is None or (not pending and elapsed >= services.settings.pipeline_timeout):
        return False
    wait["polls"] = int(wait["polls"]) + 1
    wait["token"] = token = uuid.uuid4().hex[:12]
    said = wait.get("why")
    wait["why"] = why
    progress["wait"] = wait
    drive_in(services, op, interval, now, progress=progress, deadline=not pending, token=token)
    if why is not None and why != said:
        with services.engine.begin() as conn:  # the comment says what GitLab waits for
            queue_status_comment(conn, op.id, forget=False)
    return True


def _tiers_for(op: OperationRow, kind: str) -> str:
    """Which tiers a wait polls by: its own, or -- once a pipeline webhook for the MR has
    arrived, so GitLab's hooks reach the bot -- the covered ones: a pipeline's webhook, or a
    rebase's MR event, moves the wait and the polls are a fallback (`poll.covered_tiers`); a
    rebase that fails sends no event, so its covered looks stay frequent
    (`poll.covered_rebase_tiers`)."""
    if op.pipeline_hook_at is None or kind not in ("pipeline", "rebase"):
        return kind
    return "covered" if kind == "pipeline" else "covered_rebase"


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
