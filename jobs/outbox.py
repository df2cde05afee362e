"""RQ entry point `bot.queueing.OUTBOX_JOB`: bot/app/outbox.py on this process's services."""

from __future__ import annotations

from datetime import datetime

from bot.app.outbox import DispatchReport, run_dispatch
from bot.store.models import utcnow
from jobs import context


def dispatch(limit: int = 100, now: datetime | None = None) -> DispatchReport:
    """Claims up to `limit` due rows and performs their effects (bot.app.outbox)."""
    return run_dispatch(context.services(), limit, now or utcnow())
