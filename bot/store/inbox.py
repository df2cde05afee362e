"""The inbox table: the ack path's one-statement insert, marks, counted attempts, quarantine.

bot/ingress/inbox.py decides what a delivery is and when it is stored; these are its statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Text, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.store.models import INBOX, utcnow

#: What storing raises when the database is down or refuses (the web falls back to Redis).
StoreError = SQLAlchemyError

#: The reason of a delivery quarantined after its last attempt recorded no error (the worker
#: died, or was killed, while processing it).
DIED = "no error recorded: the worker stopped while processing it"
#: Longest error text kept with a delivery.
MAX_REASON = 2000
#: Longest delivery key kept (longer keys are cut: two keys equal up to here are one delivery).
KEY_LENGTH = 255


def _insert(dialect: str) -> Any:
    """INSERT ... ON CONFLICT (delivery_key) DO NOTHING RETURNING id, key, built once per dialect.

    Built once and executed with parameters: building it per delivery (values() coercion and
    the cache key) cost more CPU on the ack path than the round trip.
    """
    if dialect not in _INSERTS:
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        _INSERTS[dialect] = (
            insert(INBOX)
            .on_conflict_do_nothing(index_elements=["delivery_key"])
            .returning(INBOX.c.id, INBOX.c.delivery_key)
        )
    return _INSERTS[dialect]


_INSERTS: dict[str, Any] = {}


def new_row(
    *,
    delivery_key: str,
    source: str,
    event_type: str,
    body: bytes,
    headers: dict[str, str],
    status: str,
    reason: str | None,
    received_at: datetime,
) -> dict[str, Any]:
    """The parameters of one delivery's row for insert_new() (key and event type cut to size)."""
    return {
        "delivery_key": delivery_key[:KEY_LENGTH],
        "source": source,
        "event_type": event_type[:64],
        "body": body,
        "headers": headers,
        "status": status,
        "reason": reason,
        "attempts": 0,
        "received_at": received_at,
    }


def insert_new(engine: Engine, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Inserts the rows whose key is not stored yet, in one statement; their ids by key."""
    # one statement, so autocommit: no BEGIN and COMMIT round trips on the ack path
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # a single row is an execute(), several use SQLAlchemy's insertmanyvalues: one statement
        stmt = _insert(engine.dialect.name)
        result = conn.execute(stmt, rows[0] if len(rows) == 1 else rows)
        return {key: inbox_id for inbox_id, key in result}


def unprocessed(
    engine: Engine, older_than: datetime, limit: int = 1000, max_attempts: int | None = None
) -> list[int]:
    """Received deliveries not processed yet (their job was lost, or Redis was down).

    With `max_attempts`, a delivery whose attempts are spent is not among them: it is for
    quarantine_exhausted, never for another try.
    """
    query = (
        select(INBOX.c.id)
        .where(INBOX.c.status == "received", INBOX.c.received_at < older_than)
        .order_by(INBOX.c.id)
        .limit(limit)
    )
    if max_attempts is not None:
        query = query.where(INBOX.c.attempts < max_attempts)
    with engine.connect() as conn:
        return list(conn.execute(query).scalars())


def mark(engine: Engine, inbox_id: int, status: str, reason: str | None = None) -> bool:
    """Records how a delivery was handled; False when it was no longer "received"."""
    stmt = (
        update(INBOX)
        .where(INBOX.c.id == inbox_id, INBOX.c.status == "received")
        .values(status=status, reason=reason, processed_at=utcnow())
    )
    with engine.begin() as conn:
        return conn.execute(stmt).rowcount == 1


# -- poison deliveries: every processing attempt is counted before it runs ---------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """A delivery taken for processing, and which attempt this is (1-based)."""

    source: str
    event_type: str
    delivery_key: str
    body: bytes
    headers: dict[str, str]
    number: int
    #: when the delivery was received (the webhook-to-transition latency starts there)
    received_at: datetime


def begin_attempt(engine: Engine, inbox_id: int, max_attempts: int) -> Attempt | None:
    """Counts one processing attempt, committed before any work (so a crash still counts).

    None when the delivery is not "received" any more, or its attempts are spent (the caller
    then quarantines it).
    """
    stmt = (
        update(INBOX)
        .where(
            INBOX.c.id == inbox_id,
            INBOX.c.status == "received",
            INBOX.c.attempts < max_attempts,
        )
        .values(attempts=INBOX.c.attempts + 1)
        .returning(
            INBOX.c.source,
            INBOX.c.event_type,
            INBOX.c.delivery_key,
            INBOX.c.body,
            INBOX.c.headers,
            INBOX.c.attempts,
            INBOX.c.received_at,
        )
    )
    with engine.begin() as conn:
        row = conn.execute(stmt).one_or_none()
    if row is None:
        return None
    headers = row.headers if isinstance(row.headers, dict) else {}
    return Attempt(
        str(row.source),
        str(row.event_type),
        str(row.delivery_key),
        bytes(row.body),
        {str(k): str(v) for k, v in headers.items()},
        int(row.attempts),
        row.received_at,
    )


def give_back_attempt(engine: Engine, inbox_id: int, error: str) -> None:
    """Uncounts an attempt that failed on another system's trouble (GitLab or the approval
    system down): an outage is not the delivery's fault and must not quarantine it. A crash
    still counts, since nothing runs to give the attempt back."""
    stmt = (
        update(INBOX)
        .where(INBOX.c.id == inbox_id, INBOX.c.status == "received", INBOX.c.attempts > 0)
        .values(attempts=INBOX.c.attempts - 1, reason=error[:MAX_REASON])
    )
    with engine.begin() as conn:
        conn.execute(stmt)


def record_failure(engine: Engine, inbox_id: int, error: str) -> None:
    """Keeps the error of a failed attempt with the delivery (it stays "received")."""
    stmt = (
        update(INBOX)
        .where(INBOX.c.id == inbox_id, INBOX.c.status == "received")
        .values(reason=error[:MAX_REASON])
    )
    with engine.begin() as conn:
        conn.execute(stmt)


def quarantine_spent(
    engine: Engine, max_attempts: int, inbox_id: int | None = None
) -> list[tuple[int, str]]:
    """Quarantines received deliveries whose attempts are spent (one, or all), in one
    statement, their reason prefixed with the count; their (id, source)."""
    where = [INBOX.c.status == "received", INBOX.c.attempts >= max_attempts]
    if inbox_id is not None:
        where.append(INBOX.c.id == inbox_id)
    prefix = f"failed {max_attempts} processing attempts; last error: "
    stmt = (
        update(INBOX)
        .where(*where)
        .values(
            status="quarantined",
            reason=literal(prefix, Text()) + func.coalesce(INBOX.c.reason, DIED),
            processed_at=utcnow(),
        )
        .returning(INBOX.c.id, INBOX.c.source)
    )
    with engine.begin() as conn:
        return [(int(row.id), str(row.source)) for row in conn.execute(stmt)]


#: How far back doctor and the dashboard look for quarantined webhook deliveries.
DELIVERIES_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Quarantined:
    """Deliveries quarantined since a time: how many, and the newest one's source and reason."""

    count: int
    source: str | None = None
    reason: str | None = None


def quarantined_since(engine: Engine, since: datetime) -> Quarantined:
    """The deliveries quarantined since `since` (two small reads)."""
    recent = INBOX.c.status == "quarantined", INBOX.c.received_at >= since
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(INBOX).where(*recent)).scalar_one()
        newest = conn.execute(
            select(INBOX.c.source, INBOX.c.reason)
            .where(*recent)
            .order_by(INBOX.c.received_at.desc(), INBOX.c.id.desc())
            .limit(1)
        ).first()
    if not count or newest is None:
        return Quarantined(0)
    return Quarantined(int(count), newest.source, newest.reason)
