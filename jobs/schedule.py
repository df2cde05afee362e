"""The periodic jobs (sweep, outbox, reconcile), registered once with stable ids."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.config import Settings
from bot.queueing import HOOKS_INTERVAL, HOOKS_JOB, OUTBOX_JOB, RECONCILE_JOB, SWEEP_JOB
from jobs.connection import QUEUE_NAME


@dataclass(frozen=True)
class Periodic:
    """A job run every `interval` seconds; `id` is stable so any number of schedulers agree."""

    id: str
    func: str
    interval: int


def periodic_jobs(settings: Settings) -> list[Periodic]:
    """Every periodic job with its interval from the settings."""
    return [
        Periodic("gitops-sweep", SWEEP_JOB, settings.sweep_interval),
        Periodic("gitops-outbox", OUTBOX_JOB, settings.outbox_interval),
        Periodic("gitops-reconcile", RECONCILE_JOB, settings.reconcile_interval),
        Periodic("gitops-hooks", HOOKS_JOB, HOOKS_INTERVAL),
    ]


def register(scheduler: Any, settings: Settings) -> list[str]:
    """Registers the periodic jobs with rq-scheduler; re-registering replaces, never doubles."""
    now = datetime.now(UTC)
    for job in periodic_jobs(settings):
        scheduler.schedule(
            scheduled_time=now,
            func=job.func,
            interval=job.interval,
            repeat=None,
            id=job.id,
            queue_name=QUEUE_NAME,
            result_ttl=job.interval * 10,
            timeout=max(60, job.interval),
        )
    return [job.id for job in periodic_jobs(settings)]
