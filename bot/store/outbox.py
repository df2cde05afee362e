"""The outbox's rows as the dispatcher sees them: claim the due ones, then mark each sent, backed
off or deferred (bot/app/outbox.py decides which; every statement is here).

A claim pushes the rows' `next_attempt_at` forward by a lease in one short transaction
(`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two dispatchers never take the same row; SQLite's
IMMEDIATE transactions serialise claims anyway). Every mark touches only rows still unsent.

A row that failed for good is dead (`dead_at`): no claim takes it again. Only dead rows can be
retried (due at once, attempts reset) or dropped (never performed) by an operator: a dead row is
in no dispatcher's hands, so neither races a dispatch; the row's update and its audit row
(version 0, bot/store/audit.py) are one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, or_, select, update
from sqlalchemy.engine import Connection, Engine

from bot.core.table import Effect
from bot.store.audit import insert_unmoved
from bot.store.models import BINDINGS, OPERATIONS, OUTBOX

#: How long a claim holds its rows: a dispatcher that died gives them back after this.
LEASE = timedelta(seconds=120)
#: The audit events of an operator's retry and drop of a dead row (version 0: no transition).
RETRY_EVENT = "outbox_retry"
DROP_EVENT = "outbox_drop"


def live() -> ColumnElement[bool]:
    """Rows still to be performed: not sent, not dead, not dropped."""
    return and_(
        OUTBOX.c.sent_at.is_(None), OUTBOX.c.dead_at.is_(None), OUTBOX.c.dropped_at.is_(None)
    )


def _dead() -> ColumnElement[bool]:
    """Rows that failed for good and wait for an operator."""
    return and_(
        OUTBOX.c.sent_at.is_(None), OUTBOX.c.dead_at.is_not(None), OUTBOX.c.dropped_at.is_(None)
    )


@dataclass(frozen=True, slots=True)
class Claimed:
    """A claimed outbox row."""

    id: int
    operation_id: str
    effect: str
    attempts: int
    #: what the row carries besides its effect (a callback's phase change), if anything
    payload: Any = None


def _in_turn() -> ColumnElement[bool]:
    """Not a callback row behind an older one of its operation still to be sent (dead ones
    included): an operation's callbacks go one at a time, in the order of its phases."""
    older = OUTBOX.alias("older")
    return or_(
        OUTBOX.c.effect != Effect.CALLBACK.value,
        ~exists().where(
            older.c.operation_id == OUTBOX.c.operation_id,
            older.c.effect == Effect.CALLBACK.value,
            older.c.id < OUTBOX.c.id,
            older.c.sent_at.is_(None),
            older.c.dropped_at.is_(None),
        ),
    )


def claim(engine: Engine, limit: int, now: datetime, lease: timedelta = LEASE) -> list[Claimed]:
    """Takes up to `limit` due rows for this dispatcher by moving them `lease` into the future."""
    due = (
        select(OUTBOX.c.id)
        .where(live(), OUTBOX.c.next_attempt_at <= now, _in_turn())
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
        .returning(
            OUTBOX.c.id, OUTBOX.c.operation_id, OUTBOX.c.effect, OUTBOX.c.attempts, OUTBOX.c.payload
        )
    )
    with engine.begin() as conn:
        rows = conn.execute(taking).all()
    return sorted(
        (Claimed(r.id, r.operation_id, r.effect, r.attempts, r.payload) for r in rows),
        key=lambda c: c.id,
    )


def pending_count(engine: Engine) -> int:
    """Outbox rows still to be performed (dead and dropped ones left out: see dead_count)."""
    with engine.connect() as conn:
        query = select(func.count()).select_from(OUTBOX).where(live())
        return int(conn.execute(query).scalar_one())


def dead_count(engine: Engine) -> int:
    """Outbox rows that failed for good and wait for an operator (retry or drop)."""
    with engine.connect() as conn:
        query = select(func.count()).select_from(OUTBOX).where(_dead())
        return int(conn.execute(query).scalar_one())


def due_count(engine: Engine, now: datetime) -> int:
    """Outbox rows due by `now` and not yet sent (one count, whatever their number)."""
    query = select(func.count()).select_from(OUTBOX).where(live(), OUTBOX.c.next_attempt_at <= now)
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


def settle_dead(engine: Engine, operation_id: str, effect: str, now: datetime, by: int) -> int:
    """Dead rows of this operation and effect are moot once row `by` of the same effect was
    sent (each effect renders the operation's state as it is now): marked sent with a note.
    How many there were. Never a callback: each of those tells of its own phase change."""
    if effect == Effect.CALLBACK.value:
        return 0
    with engine.begin() as conn:
        result = conn.execute(
            update(OUTBOX)
            .where(_dead(), OUTBOX.c.operation_id == operation_id, OUTBOX.c.effect == effect)
            .values(sent_at=now, last_error=f"superseded: row {by} of the same effect was sent")
        )
    return int(result.rowcount or 0)


def back_off(
    engine: Engine,
    rows: Sequence[Claimed],
    until: datetime,
    error: str,
    *,
    dead_at: datetime | None = None,
) -> None:
    """The rows' effect failed: one attempt more, tried again at `until`, with the error; with
    `dead_at`, failed for good (never claimed again)."""
    with engine.begin() as conn:
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id.in_([r.id for r in rows]), OUTBOX.c.sent_at.is_(None))
            .values(
                attempts=OUTBOX.c.attempts + 1,
                next_attempt_at=until,
                last_error=error,
                dead_at=dead_at,
            )
        )


def defer(engine: Engine, rows: Sequence[Claimed], until: datetime, note: str) -> None:
    """Puts the rows off to `until` without counting an attempt."""
    with engine.begin() as conn:
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id.in_([r.id for r in rows]), OUTBOX.c.sent_at.is_(None))
            .values(next_attempt_at=until, last_error=note)
        )


# -- an operator's view and hands (gitops-bot outbox, the dashboard) ------------------------------


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """An unsent outbox row as an operator sees it."""

    id: int
    operation_id: str
    effect: str
    attempts: int
    last_error: str | None
    next_attempt_at: datetime
    created_at: datetime
    dead_at: datetime | None
    dropped_at: datetime | None
    dropped_by: str | None
    sent_at: datetime | None

    @property
    def status(self) -> str:
        """pending, dead, dropped or sent."""
        if self.sent_at is not None:
            return "sent"
        if self.dropped_at is not None:
            return "dropped"
        return "pending" if self.dead_at is None else "dead"

    def as_json(self) -> dict[str, object]:
        """The row for scripts (moments in ISO 8601)."""
        return {
            "id": self.id,
            "operation_id": self.operation_id,
            "effect": self.effect,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "next_attempt_at": self.next_attempt_at.isoformat(),
            "created_at": self.created_at.isoformat(),
            "dead_at": None if self.dead_at is None else self.dead_at.isoformat(),
            "dropped_at": None if self.dropped_at is None else self.dropped_at.isoformat(),
            "dropped_by": self.dropped_by,
        }


_COLUMNS = (
    OUTBOX.c.id,
    OUTBOX.c.operation_id,
    OUTBOX.c.effect,
    OUTBOX.c.attempts,
    OUTBOX.c.last_error,
    OUTBOX.c.next_attempt_at,
    OUTBOX.c.created_at,
    OUTBOX.c.dead_at,
    OUTBOX.c.dropped_at,
    OUTBOX.c.dropped_by,
    OUTBOX.c.sent_at,
)


def unsent_rows(engine: Engine, *, dead_only: bool, limit: int) -> list[OutboxRow]:
    """Rows not sent and not dropped (only the dead ones with `dead_only`): dead first, newest
    death first, then pending by when they are due."""
    where = (
        _dead() if dead_only else and_(OUTBOX.c.sent_at.is_(None), OUTBOX.c.dropped_at.is_(None))
    )
    query = (
        select(*_COLUMNS)
        .where(where)
        .order_by(OUTBOX.c.dead_at.is_(None), OUTBOX.c.dead_at.desc(), OUTBOX.c.next_attempt_at)
        .limit(limit)
    )
    with engine.connect() as conn:
        return [OutboxRow(*r) for r in conn.execute(query)]


def _state_of(conn: Connection, operation_id: str) -> str | None:
    query = select(BINDINGS.c.state).where(BINDINGS.c.operation_id == operation_id)
    state = conn.execute(query).scalar_one_or_none()
    return None if state is None else str(getattr(state, "value", state))


def retry_dead(
    engine: Engine, ids: Sequence[int] | None, now: datetime, actor: str, source: str
) -> list[OutboxRow]:
    """Dead rows (these ids, or every dead row for None) due at `now` again with their attempts
    reset, each audited on its operation; the rows retried (a row not dead is left alone)."""
    where = _dead() if ids is None else and_(_dead(), OUTBOX.c.id.in_(list(ids)))
    statement = (
        update(OUTBOX)
        .where(where)
        .values(attempts=0, next_attempt_at=now, dead_at=None, last_error=None)
        .returning(*_COLUMNS)
    )
    return _audited(engine, statement, RETRY_EVENT, actor, source, "retried by the operator")


def drop_dead(
    engine: Engine, ids: Sequence[int], now: datetime, actor: str, source: str
) -> list[OutboxRow]:
    """Dead rows given up on: dropped by `actor` at `now`, never performed, each audited on its
    operation; the rows dropped (a row not dead is left alone)."""
    statement = (
        update(OUTBOX)
        .where(_dead(), OUTBOX.c.id.in_(list(ids)))
        .values(dropped_at=now, dropped_by=actor[:255])
        .returning(*_COLUMNS)
    )
    return _audited(engine, statement, DROP_EVENT, actor, source, "dropped by the operator")


def _audited(
    engine: Engine, statement: Any, event: str, actor: str, source: str, what: str
) -> list[OutboxRow]:
    with engine.begin() as conn:
        rows = sorted((OutboxRow(*r) for r in conn.execute(statement)), key=lambda r: r.id)
        for row in rows:
            insert_unmoved(
                conn,
                operation_id=row.operation_id,
                event=event,
                source=source,
                detail=f"outbox row {row.id} ({row.effect}) {what}",
                state=_state_of(conn, row.operation_id),
                actor=actor,
            )
    return rows


def get_row(engine: Engine, row_id: int) -> OutboxRow | None:
    """One row, sent or not (to say why it could not be retried or dropped)."""
    with engine.connect() as conn:
        found = conn.execute(select(*_COLUMNS).where(OUTBOX.c.id == row_id)).first()
    return None if found is None else OutboxRow(*found)


@dataclass(frozen=True, slots=True)
class CallbackTarget:
    """Where an operation's callbacks go, and the change's branch they tell of."""

    url: str
    target_branch: str


def callback_targets(engine: Engine, operation_ids: Sequence[str]) -> dict[str, CallbackTarget]:
    """The callback target of each of these operations that has one (the dispatcher, the
    dashboard's dead rows)."""
    if not operation_ids:
        return {}
    query = select(OPERATIONS.c.id, OPERATIONS.c.callback_url, OPERATIONS.c.target_branch).where(
        OPERATIONS.c.id.in_(list(operation_ids)), OPERATIONS.c.callback_url.is_not(None)
    )
    with engine.connect() as conn:
        return {r.id: CallbackTarget(r.callback_url, r.target_branch) for r in conn.execute(query)}
