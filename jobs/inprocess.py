"""Running the queue inside this process: the embedded default's worker, and tests' burst mode.

RQ's SimpleWorker runs jobs without forking; here it also runs off the main thread (no signal
handlers; job timeouts by a timer). Delayed jobs (`enqueue_in`) are promoted to the queue when
due, as RQ's scheduler would.
"""

from __future__ import annotations

import time
from typing import Any

from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from rq.timeouts import TimerDeathPenalty

from jobs.connection import QUEUE_NAME


class ThreadWorker(SimpleWorker):
    """A SimpleWorker that can run in any thread."""

    death_penalty_class = TimerDeathPenalty

    def _install_signal_handlers(self) -> None:
        """No signal handlers off the main thread; the owner stops it between bursts."""


class InProcess:
    """Promotes due delayed jobs and works the queue in bursts, in this process."""

    def __init__(self, redis: Redis, queue_name: str = QUEUE_NAME) -> None:
        self.redis = redis
        self.queue = Queue(queue_name, connection=redis)

    def promote(self, until: float | None = None) -> int:
        """Moves delayed jobs due by `until` (unix seconds; default now) onto the queue."""
        registry = ScheduledJobRegistry(queue=self.queue)  # type: ignore[no-untyped-call]
        ids = registry.get_jobs_to_schedule(int(until if until is not None else time.time()))
        for job_id, job in zip(ids, Job.fetch_many(ids, connection=self.redis), strict=True):
            registry.remove(job_id)
            if job is not None:
                self.queue.enqueue_job(job)
        return len(ids)

    def burst(self, *, until: float | None = None, max_rounds: int = 200) -> int:
        """Works until nothing is queued or due by `until`; the number of rounds it took."""
        for rounds in range(max_rounds):
            promoted = self.promote(until)
            if not promoted and self.queue.count == 0:
                return rounds
            ThreadWorker([self.queue], connection=self.redis).work(
                burst=True, logging_level="WARNING"
            )
        return max_rounds

    def failed(self) -> list[Any]:
        """Jobs that raised (with their exception text), for tests and the dashboard."""
        registry = FailedJobRegistry(queue=self.queue)
        return [Job.fetch(job_id, connection=self.redis) for job_id in registry.get_job_ids()]
