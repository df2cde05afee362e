"""The work queue as the domain sees it; jobs/ implements it with RQ (or RQ on fakeredis)."""

from __future__ import annotations

from typing import Protocol

from bot.errors import TransientError


class QueueUnavailable(TransientError):
    """The queue (Redis) did not take the job; the database still has what is needed."""


class WorkQueue(Protocol):
    """Where the web app and jobs put work; job functions are named by import path."""

    def enqueue(self, func: str, *args: object, job_id: str | None = None) -> None:
        """Runs `func(*args)` soon; a job with the same id already queued is not added again."""

    def enqueue_in(
        self, seconds: float, func: str, *args: object, job_id: str | None = None
    ) -> None:
        """Runs `func(*args)` after `seconds`."""

    def length(self) -> int:
        """Jobs waiting to run (for the overload bound)."""
