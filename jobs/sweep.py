"""RQ entry point `bot.queueing.SWEEP_JOB`: bot/app/sweep.py on this process's services."""

from __future__ import annotations

from datetime import datetime

from bot.app.sweep import SweepReport, run_sweep
from bot.store.models import utcnow
from jobs import context


def sweep(now: datetime | None = None) -> SweepReport:
    """One sweep, a periodic job (bot.app.sweep)."""
    return run_sweep(context.services(), now or utcnow())
