"""The inbox: every delivery stored once (unique on its key) before anything acts on it.

When the database is down a delivery goes to a Redis list instead and is moved into the
inbox, deduplicated as usual, when the database is back (drain_fallback).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import Counter
from sqlalchemy import Text, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine

from bot.store.models import INBOX, utcnow

log = logging.getLogger(__name__)

#: Redis lists holding deliveries that arrived while the database was down.
FALLBACK_KEY = "gitops:inbox:fallback"
FALLBACK_WORK_KEY = "gitops:inbox:fallback:moving"

#: Delivery headers worth keeping; the secret-bearing ones (X-Gitlab-Token...) never are.
KEPT_HEADERS = (
    "X-Gitlab-Event",
    "Idempotency-Key",
    "X-Gitlab-Event-UUID",
    "X-Gitlab-Webhook-UUID",
    "X-Gitlab-Instance",
    "X-Approval-Timestamp",
    "User-Agent",
    "Content-Type",
)


def body_key(source: str, event_type: str, body: bytes) -> str:
    """A delivery key from the content when the sender gave none."""
    digest = hashlib.sha256(event_type.encode() + b"\n" + body).hexdigest()
    return f"{source}:sha256:{digest}"


class Headers(Protocol):
    """Anything with a case-insensitive get(), like werkzeug's request headers."""

    def get(self, key: str) -> str | None: ...


def kept_headers(headers: Headers) -> dict[str, str]:
    """The headers stored with a delivery (never a token or signature)."""
    kept = {name: headers.get(name) for name in KEPT_HEADERS}
    return {name: value for name, value in kept.items() if value is not None}


@dataclass(frozen=True)
class Delivery:
    """A webhook or callback as received."""

    source: str
    delivery_key: str
    event_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    #: "received" (to process) or "quarantined" (authenticated but unusable)
    status: str = "received"
    reason: str | None = None

    def to_json(self, received_at: datetime) -> str:
        """The delivery as a JSON line for the Redis fallback list."""
        data: dict[str, Any] = asdict(self)
        data["body"] = base64.b64encode(self.body).decode()
        data["received_at"] = received_at.isoformat()
        return json.dumps(data)

    @classmethod
    def from_json(cls, line: str | bytes) -> tuple[Delivery, datetime]:
        """The inverse of to_json."""
        data = json.loads(line)
        received_at = datetime.fromisoformat(data.pop("received_at"))
        data["body"] = base64.b64decode(data["body"])
        return cls(**data), received_at


@dataclass(frozen=True, slots=True)
class Stored:
    """Where a delivery went: its inbox id, and whether it was a duplicate."""

    inbox_id: int | None
    duplicate: bool


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


def _row(delivery: Delivery, received_at: datetime) -> dict[str, Any]:
    return {
        "delivery_key": delivery.delivery_key[:255],
        "source": delivery.source,
        "event_type": delivery.event_type[:64],
        "body": delivery.body,
        "headers": delivery.headers,
        "status": delivery.status,
        "reason": delivery.reason,
        "attempts": 0,
        "received_at": received_at,
    }


def store(engine: Engine, delivery: Delivery, received_at: datetime | None = None) -> Stored:
    """Inserts the delivery unless its key is already there (one round trip, one commit)."""
    return store_many(engine, [delivery], received_at)[0]


def store_many(
    engine: Engine, deliveries: list[Delivery], received_at: datetime | None = None
) -> list[Stored]:
    """Inserts several deliveries in one statement and one commit (group commit).

    A key already stored, or repeated within `deliveries`, is a duplicate: only its first
    occurrence can be new.
    """
    when = received_at or utcnow()
    rows: dict[str, dict[str, Any]] = {}
    for delivery in deliveries:
        rows.setdefault(delivery.delivery_key[:255], _row(delivery, when))
    # one statement, so autocommit: no BEGIN and COMMIT round trips on the ack path
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        params = list(rows.values())
        # a single row is an execute(), several use SQLAlchemy's insertmanyvalues: one statement
        stmt = _insert(engine.dialect.name)
        result = conn.execute(stmt, params[0] if len(params) == 1 else params)
        inserted = {key: inbox_id for inbox_id, key in result}
    results: list[Stored] = []
    for delivery in deliveries:
        inbox_id = inserted.pop(delivery.delivery_key[:255], None)
        results.append(Stored(inbox_id, inbox_id is None))
    return results


def push_fallback(redis: Any, delivery: Delivery, received_at: datetime | None = None) -> None:
    """Keeps a delivery in Redis while the database is down (raises when Redis is down too)."""
    redis.lpush(FALLBACK_KEY, delivery.to_json(received_at or utcnow()))


def drain_fallback(engine: Engine, redis: Any, limit: int = 1000) -> list[int]:
    """Moves fallback deliveries into the inbox; the new inbox ids (to enqueue)."""
    new_ids: list[int] = []
    # an item moved but not stored (a crash between) is retried from the work list first
    for _ in range(limit):
        line = redis.lindex(FALLBACK_WORK_KEY, -1) or redis.lmove(
            FALLBACK_KEY, FALLBACK_WORK_KEY, "RIGHT", "LEFT"
        )
        if line is None:
            break
        delivery, received_at = Delivery.from_json(line)
        stored = store(engine, delivery, received_at)
        if stored.inbox_id is not None and delivery.status == "received":
            new_ids.append(stored.inbox_id)
        redis.lrem(FALLBACK_WORK_KEY, 1, line)
    return new_ids


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

#: The reason of a delivery quarantined after its last attempt recorded no error (the worker
#: died, or was killed, while processing it).
DIED = "no error recorded: the worker stopped while processing it"
#: Longest error text kept with a delivery.
MAX_REASON = 2000


POISON = Counter(
    "gitops_inbox_poison_total",
    "Stored deliveries quarantined after failing processing GITOPS_INBOX_MAX_ATTEMPTS times "
    "(raising, or stopping the worker), by source; the sweep no longer re-enqueues them.",
    ["source"],
)


@dataclass(frozen=True, slots=True)
class Attempt:
    """A delivery taken for processing, and which attempt this is (1-based)."""

    source: str
    event_type: str
    delivery_key: str
    body: bytes
    headers: dict[str, str]
    number: int


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


def quarantine_exhausted(
    engine: Engine, max_attempts: int, inbox_id: int | None = None
) -> list[tuple[int, str]]:
    """Quarantines received deliveries whose attempts are spent, with their last error.

    One delivery (`inbox_id`) or all of them (the sweep), in one statement; each is counted
    (gitops_inbox_poison_total) by the call that quarantined it. Their (id, source).
    """
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
        done = [(int(row.id), str(row.source)) for row in conn.execute(stmt)]
    for quarantined_id, source in done:
        POISON.labels(source).inc()
        log.warning(
            "delivery quarantined after %d failed processing attempts",
            max_attempts,
            extra={"inbox_id": quarantined_id, "source": source},
        )
    return done
