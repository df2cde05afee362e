"""The work queue as the domain sees it, and the names of the jobs put on it.

jobs/ implements the queue with RQ (or RQ on fakeredis). A job is named by the import path of its
function, as RQ imports it in the worker; each name is written here once.
"""

from __future__ import annotations

from typing import Protocol

from bot.errors import TransientError

#: Runs an operation's next step, and the ones after it while it moves (bot/app/steps/drive.py).
DRIVE_JOB = "jobs.drive.drive"
#: Processes stored deliveries by inbox id (bot/app/events/inbox.py).
INBOX_JOB = "jobs.inbox.process"
#: Performs the outbox's due effects: status comments, labels, closes, withdrawals.
OUTBOX_JOB = "jobs.outbox.dispatch"
#: Finds what was lost (overdue operations, unprocessed deliveries) and sets it going again.
SWEEP_JOB = "jobs.sweep.sweep"
#: Validates merged changes whose deployment word was lost.
RECONCILE_JOB = "jobs.reconcile.reconcile"
#: Checks the managed projects' webhooks and the protection of the bot's branches.
HOOKS_JOB = "jobs.hooks.check"
#: Seconds between hooks checks (one GitLab call per project); the dashboard calls a result
#: older than three of them old.
HOOKS_INTERVAL = 300


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
