"""RQ entry point `bot.queueing.RECONCILE_JOB`: bot/app/reconcile.py on this process's services."""

from __future__ import annotations

from datetime import datetime

from bot.app import reconcile as app
from jobs import context


def reconcile(now: datetime | None = None, dry_run: bool = False) -> app.ReconcileReport:
    """One reconciliation run, a periodic job; `dry_run` only reports (bot.app.reconcile)."""
    return app.reconcile(context.services(), now, dry_run)
