"""RQ behind the domain's WorkQueue protocol."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import DuplicateJobError, NoSuchJobError
from rq.job import Job, JobStatus

from bot import logs
from bot.queueing import QueueUnavailable
from jobs.connection import QUEUE_NAME

#: A job that runs longer than this is killed by RQ (steps are short: one GitLab exchange).
JOB_TIMEOUT = 120
#: How long a failed job is kept for inspection (the database, not Redis, recovers the work).
FAILURE_TTL = 86400


def rq_job_id(job_id: str | None) -> str | None:
    """Our readable ids ("drive:<uuid>") in the characters RQ allows."""
    return None if job_id is None else re.sub(r"[^A-Za-z0-9_-]", "-", job_id)


def not_before(due: datetime) -> datetime:
    """`due` rounded up to a whole second.

    RQ keeps a scheduled job's time in whole seconds, truncated (`calendar.timegm`), so a job
    due at 12.4 s would run from 12 s on: early by up to a second, which for a retry means
    sooner than GitLab's Retry-After.
    """
    whole = due.replace(microsecond=0)
    return whole if whole == due else whole + timedelta(seconds=1)


class RQWorkQueue:
    """Enqueues job functions by import path; Redis errors become QueueUnavailable."""

    def __init__(self, redis: Redis, name: str = QUEUE_NAME) -> None:
        self.redis = redis
        self.queue = Queue(name, connection=redis, default_timeout=JOB_TIMEOUT)

    def enqueue(self, func: str, *args: object, job_id: str | None = None) -> None:
        """Runs `func(*args)` soon; an id already waiting in the queue is not added twice. A job
        with an id takes along the correlation id bound now (bot/logs.py `carried`)."""
        job_id = rq_job_id(job_id)
        if job_id is None:
            self._enqueue_plain(func, *args)
            return
        meta = logs.carried() or None
        try:
            try:
                self.queue.enqueue(
                    func,
                    *args,
                    job_id=job_id,
                    unique=job_id is not None,
                    result_ttl=0,
                    failure_ttl=FAILURE_TTL,
                    meta=meta,
                )
            except DuplicateJobError:
                assert job_id is not None
                if self._waiting(job_id):
                    return  # it will run, and read the state as it is then
                # that id ran already (or is running): this is a new reason to run
                self.queue.enqueue(func, *args, result_ttl=0, failure_ttl=FAILURE_TTL, meta=meta)
        except RedisError as exc:
            raise QueueUnavailable(f"could not enqueue {func}: {type(exc).__name__}") from exc

    def _enqueue_plain(self, func: str, *args: object) -> None:
        """A job without an id in one round trip (RQ alone makes two: the queue set, the job)."""
        try:
            with self.redis.pipeline() as pipe:
                self.queue.enqueue(
                    func, *args, result_ttl=0, failure_ttl=FAILURE_TTL, pipeline=pipe
                )
                pipe.execute()
        except RedisError as exc:
            raise QueueUnavailable(f"could not enqueue {func}: {type(exc).__name__}") from exc

    def enqueue_in(
        self, seconds: float, func: str, *args: object, job_id: str | None = None
    ) -> None:
        """Runs `func(*args)` after `seconds`, never sooner (RQ's scheduled job registry), with
        the correlation id bound now."""
        job_id = rq_job_id(job_id)
        try:
            self.queue.enqueue_at(
                not_before(datetime.now(UTC) + timedelta(seconds=seconds)),
                func,
                *args,
                job_id=job_id,
                result_ttl=0,
                failure_ttl=FAILURE_TTL,
                meta=logs.carried() or None,
            )
        except RedisError as exc:
            raise QueueUnavailable(f"could not schedule {func}: {type(exc).__name__}") from exc

    def length(self) -> int:
        """Jobs waiting in the queue now."""
        try:
            return int(self.queue.count)
        except RedisError as exc:
            raise QueueUnavailable("could not read the queue length") from exc

    def _waiting(self, job_id: str) -> bool:
        """True when a job with this id is queued and not yet started."""
        try:
            job = Job.fetch(job_id, connection=self.redis)
        except NoSuchJobError:
            return False
        return job.get_status(refresh=False) in {JobStatus.QUEUED, JobStatus.SCHEDULED}
