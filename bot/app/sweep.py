"""The sweep: whatever was lost (a killed worker, a flushed Redis) is found again in the database.

One run: operations past their deadline are re-driven (steps are idempotent) or, past the retry
budget, failed explicitly; merged changes without the deployment's word past GITOPS_DEPLOY_TIMEOUT
are reported pending (DEPLOY_PENDING, once); deliveries stored but never processed are enqueued
again (those whose GITOPS_INBOX_MAX_ATTEMPTS attempts are spent are quarantined instead);
deliveries kept in Redis while the database was down are moved in; the outbox is dispatched if
anything is due; the run is recorded (one upsert: `gitops_last_sweep_timestamp_seconds`). A
constant number of queries, whatever the number of rows, but one fire() per operation that moves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from prometheus_client import Counter
from redis.exceptions import RedisError

from bot.app.queue import follow
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState
from bot.errors import Conflict, IllegalTransition, NotOwner
from bot.ingress import inbox
from bot.queueing import DRIVE_JOB, INBOX_JOB, OUTBOX_JOB, QueueUnavailable
from bot.services import Services
from bot.store.fire import fire
from bot.store.flags import get_flag
from bot.store.outbox import due_count
from bot.store.sweep import PEOPLE_STATES, deploy_overdue, overdue, rearm, record_sweep

log = logging.getLogger(__name__)

SWEPT = Counter("gitops_sweep_total", "Operations the sweep acted on, by what it did.", ["action"])

#: Deliveries younger than this are left to the job enqueued when they arrived.
INBOX_GRACE = timedelta(seconds=10)


@dataclass
class SweepReport:
    """What one sweep did."""

    redriven: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    #: merged changes reported "deploy unconfirmed" (DEPLOY_PENDING) by this run
    deploy_pending: list[str] = field(default_factory=list)
    inbox: int = 0
    fallback: int = 0
    outbox_due: int = 0

    def counts(self) -> dict[str, int]:
        """How many of each, as the run's record keeps them."""
        return {
            "redriven": len(self.redriven),
            "expired": len(self.expired),
            "deploy_pending": len(self.deploy_pending),
            "inbox": self.inbox,
            "fallback": self.fallback,
            "outbox_due": self.outbox_due,
        }


def run_sweep(services: Services, now: datetime) -> SweepReport:
    """The sweep over these services at `now`."""
    engine, settings = services.engine, services.settings
    report = SweepReport()
    budget = int(get_flag(engine, "sweep.retry_budget"))
    for op_id, state, attempts in overdue(engine, now, settings.step_timeout):
        people = BindingState(state) in PEOPLE_STATES
        if not people and attempts >= budget:
            report.expired.append(op_id)
        else:
            report.redriven.append(op_id)
    if report.redriven:
        rearm(engine, report.redriven, now, settings.step_timeout)
    for op_id in report.redriven:
        _enqueue(services, DRIVE_JOB, op_id, job_id=f"drive:{op_id}")
    SWEPT.labels("redriven").inc(len(report.redriven))
    for op_id in report.expired:
        try:
            made = fire(
                engine,
                TransitionRequest(
                    op_id,
                    Event.DEADLINE_EXPIRED,
                    source=Source.SWEEP,
                    actor="sweep",
                    changes={
                        "deadline_at": None,
                        "error_detail": f"no progress after {budget} re-drives",
                    },
                ),
            )
            SWEPT.labels("expired").inc()
            follow(services, made)  # failed at the head of its merge queue: the next goes
        except (IllegalTransition, Conflict, NotOwner) as exc:
            log.info("sweep could not expire: %s", exc, extra={"operation_id": op_id})
    report.deploy_pending = _deploy_timed_out(services, now)
    report.inbox = _requeue_inbox(services, now)
    report.fallback = _drain_fallback(services)
    report.outbox_due = due_count(engine, now)
    if report.outbox_due:
        _enqueue(services, OUTBOX_JOB, job_id="outbox-dispatch")
    record_sweep(engine, now, report.counts())
    return report


def _deploy_timed_out(services: Services, now: datetime) -> list[str]:
    """Merged changes past the deploy deadline become DEPLOY_PENDING: pending, not failed; the
    deployment's word or reconciliation still validates them. The deadline is cleared, so each
    is reported once; pinned to the version read, so a signal that came meanwhile wins."""
    timeout = services.settings.deploy_timeout
    moved: list[str] = []
    for op_id, version in deploy_overdue(services.engine, now, timeout):
        try:
            fire(
                services.engine,
                TransitionRequest(
                    op_id,
                    Event.DEPLOY_TIMED_OUT,
                    expected_version=version,
                    source=Source.SWEEP,
                    actor="sweep",
                    changes={"deadline_at": None},
                    detail=f"no deploy signal within {timeout} s of the merge",
                ),
            )
        except (IllegalTransition, Conflict, NotOwner) as exc:
            log.info("sweep could not time out: %s", exc, extra={"operation_id": op_id})
            continue
        moved.append(op_id)
    SWEPT.labels("deploy_pending").inc(len(moved))
    return moved


def _enqueue(services: Services, func_name: str, *args: object, job_id: str) -> None:
    try:
        services.queue.enqueue(func_name, *args, job_id=job_id)
    except QueueUnavailable:
        log.warning("queue down during the sweep; the next sweep tries again")


def _requeue_inbox(services: Services, now: datetime) -> int:
    """Enqueues stored deliveries again, except those whose attempts are spent: quarantined."""
    limit = services.settings.inbox_max_attempts
    inbox.quarantine_exhausted(services.engine, limit)
    ids = inbox.unprocessed(services.engine, older_than=now - INBOX_GRACE, max_attempts=limit)
    for inbox_id in ids:
        _enqueue(services, INBOX_JOB, inbox_id, job_id=f"inbox:{inbox_id}")
    return len(ids)


def _drain_fallback(services: Services) -> int:
    if services.redis is None:
        return 0
    try:
        ids = inbox.drain_fallback(services.engine, services.redis)
    except RedisError:
        return 0
    for inbox_id in ids:
        _enqueue(services, INBOX_JOB, inbox_id, job_id=f"inbox:{inbox_id}")
    return len(ids)
