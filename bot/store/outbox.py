"""The outbox's rows as the dispatcher sees them: claim the due ones, then mark each sent, backed
off or deferred (bot/app/outbox.py decides which; every statement is here).

A claim pushes the rows' `next_attempt_at` forward by a lease in one short transaction
(`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two dispatchers never take the same row; SQLite's
IMMEDIATE transactions serialise claims anyway). Every mark touches only rows still unsent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

from bot.store.models import OUTBOX

#: How long a claim holds its rows: a dispatcher that died gives them back after this.
LEASE = timedelta(seconds=120)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A claimed outbox row."""

    id: int
    operation_id: str
    effect: str
    attempts: int


def claim(engine: Engine, limit: int, now: datetime, lease: timedelta = LEASE) -> list[Claimed]:
    """Takes up to `limit` due rows for this dispatcher by moving them `lease` into the future."""
    due = (
        select(OUTBOX.c.id)
        .where(OUTBOX.c.sent_at.is_(None), OUTBOX.c.next_attempt_at <= now)
        .order_by(OUTBOX.c.next_attempt_at, OUTBOX.c.id)
        .limit(limit)
    )
    if engine.dialect.name == "postgresql":
        # rows another dispatcher holds are skipped, not waited for (PostgreSQL docs, SELECT,
        # "The Locking Clause"); the lock lasts until this short transaction commits
        due = due.with_for_update(skip_locked=True)
    taking = (
        update(OUTBOX)
        .where(OUTBOX.c.id.in_(due.scalar_subquery()))
        .values(next_attempt_at=now + lease)
        .returning(OUTBOX.c.id, OUTBOX.c.operation_id, OUTBOX.c.effect, OUTBOX.c.attempts)
    )
    with engine.begin() as conn:
        rows = conn.execute(taking).all()
    return sorted(
        (Claimed(r.id, r.operation_id, r.effect, r.attempts) for r in rows), key=lambda c: c.id
    )


def pending_count(engine: Engine) -> int:
    """Outbox rows not yet sent (dead ones included: they need a person)."""
    with engine.connect() as conn:
        query = select(func.count()).select_from(OUTBOX).where(OUTBOX.c.sent_at.is_(None))
        return int(conn.execute(query).scalar_one())


def due_count(engine: Engine, now: datetime) -> int:
    """Outbox rows due by `now` and not yet sent (one count, whatever their number)."""
    query = (
        select(func.count())
        .select_from(OUTBOX)
        .where(OUTBOX.c.sent_at.is_(None), OUTBOX.c.next_attempt_at <= now)
    )
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def mark_sent(engine: Engine, rows: Sequence[Claimed], now: datetime, note: str | None) -> None:
    """The rows are done (performed, coalesced or nothing to do); `note` says why, if anything."""
    with engine.begin() as conn:
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id.in_([r.id for r in rows]), OUTBOX.c.sent_at.is_(None))
            .values(sent_at=now, last_error=note)
        )


def back_off(engine: Engine, rows: Sequence[Claimed], until: datetime, error: str) -> None:
    """The rows' effect failed: one attempt more, tried again at `until`, with the error."""
    with engine.begin() as conn:
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id.in_([r.id for r in rows]), OUTBOX.c.sent_at.is_(None))
            .values(attempts=OUTBOX.c.attempts + 1, next_attempt_at=until, last_error=error)
        )


def defer(engine: Engine, rows: Sequence[Claimed], until: datetime, note: str) -> None:
    """Puts the rows off to `until` without counting an attempt."""
    with engine.begin() as conn:
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id.in_([r.id for r in rows]), OUTBOX.c.sent_at.is_(None))
            .values(next_attempt_at=until, last_error=note)
        )
