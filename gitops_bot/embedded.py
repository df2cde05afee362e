"""The embedded default's worker and scheduler: one thread inside the `serve` process.

Each tick enqueues the periodic jobs that are due, promotes delayed jobs that are due, and
works the in-process queue (fakeredis) in a burst. The tick is the clock of this runtime, as
rq-scheduler's loop is for the `scheduler` process; no step ever waits inside a job.
"""

from __future__ import annotations

import logging
import threading
import time

from bot.queueing import QueueUnavailable
from bot.services import Services
from jobs.inprocess import InProcess
from jobs.schedule import periodic_jobs

log = logging.getLogger(__name__)

#: Seconds between ticks (the latency of the embedded default's queue).
TICK = 0.25


class EmbeddedRuntime(threading.Thread):
    """Runs the jobs of a `serve` process until stopped."""

    def __init__(self, services: Services, tick: float = TICK) -> None:
        super().__init__(name="gitops-embedded", daemon=True)
        self.services = services
        self.tick = tick
        self.runner = InProcess(services)  # each job runs with these services installed
        self.periodic = periodic_jobs(services.settings)
        self.due = {job.id: 0.0 for job in self.periodic}
        self.stopping = threading.Event()

    def run(self) -> None:
        """Ticks until stop() is called."""
        while not self.stopping.wait(self.tick):
            self.tick_once(time.time())

    def tick_once(self, now: float) -> None:
        """Enqueues due periodic jobs and works everything that is due."""
        for job in self.periodic:
            if now >= self.due[job.id]:
                self.due[job.id] = now + job.interval
                try:
                    self.services.queue.enqueue(job.func, job_id=job.id)
                except QueueUnavailable:
                    log.warning("in-process queue unavailable")
        try:
            self.runner.burst(until=now, max_jobs=1000)
        except Exception:
            log.exception("embedded worker tick failed; the next tick goes on")

    def stop(self) -> None:
        """Asks the thread to finish after the current tick."""
        self.stopping.set()
