"""The `worker` process's RQ worker: it runs each job with the process's services installed."""

from __future__ import annotations

from typing import Any

from rq import Queue, SimpleWorker
from rq.job import Job

from bot import logs
from bot.services import Services
from jobs import context
from jobs.connection import QUEUE_NAME


class ServicesWorker(SimpleWorker):
    """An RQ worker on the bot's queue whose jobs run on the services it was built with.

    No fork per job (SimpleWorker): steps are short, and the services (the engine's pool, the
    GitLab clients) are built once per process, by `gitops-bot worker`, and reused.
    """

    def __init__(self, services: Services, **kwargs: Any) -> None:
        queue = Queue(QUEUE_NAME, connection=services.redis)
        super().__init__([queue], connection=services.redis, **kwargs)
        self.services = services

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Performs `job` with this worker's services installed (jobs/context.py), its log lines
        bound to what it carried and nothing left from the job before (bot/logs.py)."""
        with logs.job_scope(job.meta), context.installed(self.services):
            super().execute_job(job, queue)
