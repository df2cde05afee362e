"""What the health endpoints read: whether the database answers, and the work waiting in it."""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.store.models import INBOX, OUTBOX


def database_ready(engine: Engine) -> str:
    """`ok` when the database answers `SELECT 1`, else the name of the error it raised."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return type(exc).__name__
    return "ok"


def backlog(engine: Engine) -> tuple[int, int] | None:
    """Outbox rows not sent yet and inbox rows not processed yet (None: the database failed)."""
    try:
        with engine.connect() as conn:
            pending = conn.execute(
                select(func.count()).select_from(OUTBOX).where(OUTBOX.c.sent_at.is_(None))
            ).scalar_one()
            waiting = conn.execute(
                select(func.count()).select_from(INBOX).where(INBOX.c.status == "received")
            ).scalar_one()
    except SQLAlchemyError:
        return None
    return int(pending), int(waiting)
