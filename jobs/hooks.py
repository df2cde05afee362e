"""RQ entry point `bot.queueing.HOOKS_JOB`: bot/app/hooks.py on this process's services."""

from __future__ import annotations

from datetime import datetime

from bot.app import hooks
from bot.store.hooks import HooksReport
from jobs import context


def check(now: datetime | None = None) -> HooksReport | None:
    """The periodic hooks check (bot.app.hooks.check)."""
    return hooks.check(context.services(), now)
