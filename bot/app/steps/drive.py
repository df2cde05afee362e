"""drive(operation_id): run the operation's next step, and the ones after it while it moves.

Any number of workers may call it for the same operation: a lease in the database lets one run
the step; the others reschedule themselves. The lease is short (GITOPS_STEP_LEASE, 30 s) and the
running step renews it through its heartbeat (bot/app/steps/lease.py): a worker killed mid-step
leaves an expired lease that the next sweep finds. Every exit leaves a waiting or terminal state,
or a deadline or an expired lease the sweep will act on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime

from bot import logs
from bot.app.steps import StepContext, approval, creation, handling
from bot.app.steps.common import advance, short
from bot.app.steps.lease import Lease
from bot.app.steps.waits import retry_later
from bot.core.events import Event
from bot.core.next_step import Action, next_action
from bot.core.states import BindingState
from bot.errors import CannotProceed, LeaseLost, TransientError, UnknownOperation
from bot.heartbeat import beat, beating
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.services import Services
from bot.store.models import utcnow
from bot.store.operations import OperationRow, load, release_lease, take_lease

log = logging.getLogger(__name__)

#: Steps one job runs back to back before it leaves the rest to a new job.
MAX_CHAIN = 8
#: Seconds a job that found the operation busy waits before trying again.
BUSY_RETRY = 2.0

STEPS: dict[Action, Callable[[StepContext], bool]] = {
    Action.SUBMIT_APPROVAL: approval.submit_approval,
    Action.AWAIT_APPROVAL: approval.await_approval,
    Action.CREATE_MR: creation.create_mr,
    Action.POLL_PIPELINE: creation.poll_pipeline,
    Action.START_HANDLING: creation.start_handling,
    Action.REQUEST_APPROVAL: creation.request_approval,
    Action.HANDLE: handling.handle,
    Action.POLL_REBASE: handling.poll_rebase,
    Action.POLL_PENDING: handling.poll_pending,
}

#: The failure each step writes when it cannot go on (every exit of a step leaves a state).
DECLARED_FAILURE: dict[Action, Event] = {
    Action.SUBMIT_APPROVAL: Event.APPROVAL_SUBMIT_FAILED,
    Action.CREATE_MR: Event.CREATE_ERROR,
    Action.POLL_PIPELINE: Event.CREATE_ERROR,
    Action.REQUEST_APPROVAL: Event.CREATE_ERROR,
    Action.HANDLE: Event.MERGE_ERROR,
    Action.POLL_REBASE: Event.MERGE_ERROR,
}

#: poll_pending runs in either phase's pending wait, which has no deadline for the sweep to find:
#: its failure is its phase's, as poll_pipeline's and poll_rebase's are.
_PENDING_FAILURE: dict[BindingState, Event] = {
    BindingState.MR_CREATING: Event.CREATE_ERROR,
    BindingState.MERGING: Event.MERGE_ERROR,
}


def declared_failure(action: Action, state: BindingState) -> Event | None:
    """The failure `action` writes when it cannot go on in `state` (None: it declares none, and
    the deadline the operation keeps brings the sweep)."""
    if action is Action.POLL_PENDING:
        return _PENDING_FAILURE.get(state)
    return DECLARED_FAILURE.get(action)


def drive(
    services: Services,
    operation_id: str,
    expected_version: int | None = None,
    wait_token: str | None = None,
) -> str:
    """Runs the operation's due steps; what it stopped at. `expected_version`: only if unmoved;
    `wait_token`: the poll of a wait that scheduled it (steps/waits.py superseded). Its log
    lines name the operation, its project and MR, and the step running."""
    with logs.scope(operation_id=operation_id):
        return _drive(services, operation_id, expected_version, wait_token)


def _drive(
    services: Services, operation_id: str, expected_version: int | None, wait_token: str | None
) -> str:
    try:
        op = load(services.engine, operation_id)
    except UnknownOperation:
        return "unknown"
    logs.bind(project=op.project, mr_iid=op.mr_iid)
    if not op.owner:
        return "stale"
    if expected_version is not None and op.version != expected_version:
        return "moved"  # an event got there first: this late poll changes nothing
    seconds = services.settings.lease_seconds
    taken_at = utcnow()
    token = take_lease(services.engine, op.id, seconds, now=taken_at)
    if token is None:
        with suppress(QueueUnavailable):  # if Redis is down the deadline brings the sweep
            services.queue.enqueue_in(BUSY_RETRY, DRIVE_JOB, op.id)
        return "busy"
    lease = Lease(services.engine, op.id, token, seconds, renewed_at=taken_at)
    try:
        with beating(lease.beat):
            return _run(services, op, scheduled=expected_version is not None, token=wait_token)
    except LeaseLost:
        return "lease_lost"  # another worker runs the step now; this one wrote nothing more
    finally:
        release_lease(services.engine, op.id, token)


def _run(
    services: Services, op: OperationRow, *, scheduled: bool = False, token: str | None = None
) -> str:
    clients = services.require_clients()
    action = Action.NONE
    for chained in range(MAX_CHAIN):
        beat()  # between chained steps too: the lease is renewed or found lost
        action = next_action(op.state, op.step, op.flow)
        step = STEPS.get(action)
        now = utcnow()
        if step is None or (_too_early(action, op, now) and chained):
            return action.value
        if not _attempt(StepContext(services, clients, op, now, scheduled, token), action, step):
            return action.value
        scheduled, token = False, None  # it moved: what runs next was not scheduled
        op = load(services.engine, op.id)
        logs.bind(mr_iid=op.mr_iid)  # the step may have opened it
        if not op.owner:
            return "stale"
    return action.value


def _too_early(action: Action, op: OperationRow, now: datetime) -> bool:
    """The approval just submitted (this job's previous step): nobody has looked at it yet, so
    its status is read once its deadline passes. A job that starts at the approval wait (the
    sweep's re-drive at that deadline, the wait's own next read, an event's nudge) reads it: the
    sweep pushes the deadline on before its job runs, so a deadline check there skipped every
    read and a lost approval callback was never found."""
    return action is Action.AWAIT_APPROVAL and op.deadline_at is not None and op.deadline_at > now


def _attempt(ctx: StepContext, action: Action, step: Callable[[StepContext], bool]) -> bool:
    """Runs one step; True when the operation moved. Failures are classified here, once."""
    logs.bind(step=action.value)
    extra = {"operation_id": ctx.op.id, "action": action.value}
    failure = declared_failure(action, ctx.op.state)
    try:
        return step(ctx)
    except LeaseLost:
        raise  # not the step's failure: another worker holds the operation; write nothing
    except TransientError as exc:
        log.info("transient failure, retrying later: %s", short(exc), extra=extra)
        if retry_later(ctx.services, ctx.op, ctx.now, getattr(exc, "retry_after", None)):
            return False
        if failure is None:
            return False
        return advance(ctx, failure, error_detail=f"gave up after repeated failures: {short(exc)}")
    except CannotProceed as exc:
        log.warning("step failed: %s", short(exc), extra=extra)
        if failure is None:
            return False
        return advance(ctx, failure, error_detail=short(exc))
    except Exception as exc:
        log.exception("step crashed", extra=extra)
        if failure is not None:
            advance(ctx, failure, error_detail=f"unexpected {type(exc).__name__}: {short(exc)}")
        raise
