"""Running the queue inside this process: the embedded default's worker, and tests' burst mode.

Jobs are taken from the same RQ queue a `gitops-bot worker` would take them from and run in this
thread, without RQ's worker bookkeeping (births, heartbeats, registries): one process, one
thread, nothing to supervise. Delayed jobs (`enqueue_in`) are promoted to the queue when due,
as RQ's scheduler would. Each job runs with the services it was given installed (jobs/context.py).
A job that raises is logged and kept in `errors`.
"""

from __future__ import annotations

import logging
import time
import traceback
from contextlib import suppress

from rq import Queue
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from bot import logs
from bot.services import Services
from jobs import context
from jobs.connection import QUEUE_NAME

log = logging.getLogger(__name__)


class InProcess:
    """Promotes due delayed jobs and works the queue in bursts, in this thread, on `services`."""

    def __init__(self, services: Services, queue_name: str = QUEUE_NAME) -> None:
        self.services = services
        self.redis = services.redis
        self.queue = Queue(queue_name, connection=self.redis)
        #: (job function, traceback) of every job that raised
        self.errors: list[tuple[str, str]] = []

    def promote(self, until: float | None = None) -> int:
        """Moves delayed jobs due by `until` (unix seconds; default now) onto the queue."""
        registry = ScheduledJobRegistry(queue=self.queue)  # type: ignore[no-untyped-call]
        ids = registry.get_jobs_to_schedule(int(until if until is not None else time.time()))
        for job_id, job in zip(ids, Job.fetch_many(ids, connection=self.redis), strict=True):
            registry.remove(job_id)
            if job is not None:
                self.queue.enqueue_job(job)
        return len(ids)

    def pending(self) -> list[str]:
        """The jobs waiting: queued ones, then scheduled ones with when they fall due (unix
        seconds), each as `func(args)`; for a test's or an operator's account of a stall."""
        registry = ScheduledJobRegistry(queue=self.queue)  # type: ignore[no-untyped-call]
        due = dict(self.redis.zrange(registry.key, 0, -1, withscores=True))
        queued = [(job_id, None) for job_id in self.queue.get_job_ids()]
        scheduled = [(key.decode(), score) for key, score in due.items()]
        ids = [job_id for job_id, _ in (*queued, *scheduled)]
        found = []
        for (job_id, score), job in zip(
            (*queued, *scheduled), Job.fetch_many(ids, connection=self.redis), strict=True
        ):
            what = "gone" if job is None else f"{job.func_name}{tuple(job.args)}"
            found.append(f"{job_id}: {what}" + ("" if score is None else f" due {score:.0f}"))
        return found

    def run_one(self) -> bool:
        """Runs the next queued job; False when the queue is empty."""
        taken = Queue.dequeue_any([self.queue], timeout=None, connection=self.redis)
        if taken is None:
            return False
        job, _ = taken
        with logs.job_scope(job.meta):
            try:
                with context.installed(self.services):
                    job.perform()
            except Exception:
                log.exception("job %s failed", job.func_name)
                self.errors.append((job.func_name or "?", traceback.format_exc()))
            finally:
                # its id may be used again by the next job of the same kind; a job already gone
                # (deleted or flushed while it ran) has nothing left to delete
                with suppress(InvalidJobOperation, NoSuchJobError):
                    job.delete()
        return True

    def burst(self, *, until: float | None = None, max_jobs: int = 10_000) -> int:
        """Works until nothing is queued or due by `until`; the number of jobs run."""
        done = 0
        while done < max_jobs:
            if self.run_one():
                done += 1
            elif not self.promote(until):
                break
        return done
