"""The inbox job's own read: where a stored delivery stands when its attempt could not begin."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.store.models import INBOX


def inbox_status(engine: Engine, inbox_id: int) -> str | None:
    """The row's status ("received", "processed", "quarantined", ...), or None when it is gone."""
    with engine.connect() as conn:
        found = conn.execute(
            select(INBOX.c.status).where(INBOX.c.id == inbox_id)
        ).scalar_one_or_none()
    return None if found is None else str(found)
