"""RQ entry point `bot.queueing.INBOX_JOB`: bot/app/events/inbox.py on this process's services."""

from __future__ import annotations

from bot.app.events import inbox
from jobs import context


def process(inbox_id: int, *more: int) -> str:
    """Handles stored deliveries once each (bot.app.events.inbox.process)."""
    return inbox.process(context.services(), inbox_id, *more)
