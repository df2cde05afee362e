"""The inbox: every delivery stored once (unique on its key) before anything acts on it.

When the database is down a delivery goes to a Redis list instead and is moved into the
inbox, deduplicated as usual, when the database is back (drain_fallback). The statements are
bot/store/inbox.py's; the ones used as they are (mark, attempts, failures) are re-exported here.
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

from bot.store import inbox as table
from bot.store.engine import Engine
from bot.store.inbox import (
    DIED,
    MAX_REASON,
    Attempt,
    begin_attempt,
    give_back_attempt,
    mark,
    record_failure,
    unprocessed,
)
from bot.store.models import utcnow

__all__ = [
    "DIED",
    "FALLBACK_KEY",
    "FALLBACK_WORK_KEY",
    "KEPT_HEADERS",
    "MAX_REASON",
    "POISON",
    "Attempt",
    "Delivery",
    "StoredDelivery",
    "begin_attempt",
    "body_key",
    "drain_fallback",
    "give_back_attempt",
    "kept_headers",
    "mark",
    "push_fallback",
    "quarantine_exhausted",
    "record_failure",
    "store",
    "store_many",
    "unprocessed",
]

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
class StoredDelivery:
    """Where a delivery went: its inbox id, and whether it was a duplicate."""

    inbox_id: int | None
    duplicate: bool


def _row(delivery: Delivery, received_at: datetime) -> dict[str, Any]:
    return table.new_row(
        delivery_key=delivery.delivery_key,
        source=delivery.source,
        event_type=delivery.event_type,
        body=delivery.body,
        headers=delivery.headers,
        status=delivery.status,
        reason=delivery.reason,
        received_at=received_at,
    )


def store(
    engine: Engine, delivery: Delivery, received_at: datetime | None = None
) -> StoredDelivery:
    """Inserts the delivery unless its key is already there (one round trip, one commit)."""
    return store_many(engine, [delivery], received_at)[0]


def store_many(
    engine: Engine, deliveries: list[Delivery], received_at: datetime | None = None
) -> list[StoredDelivery]:
    """Inserts several deliveries in one statement and one commit (group commit).

    A key already stored, or repeated within `deliveries`, is a duplicate: only its first
    occurrence can be new.
    """
    when = received_at or utcnow()
    rows: dict[str, dict[str, Any]] = {}
    for delivery in deliveries:
        rows.setdefault(delivery.delivery_key[: table.KEY_LENGTH], _row(delivery, when))
    inserted = table.insert_new(engine, list(rows.values()))
    results: list[StoredDelivery] = []
    for delivery in deliveries:
        inbox_id = inserted.pop(delivery.delivery_key[: table.KEY_LENGTH], None)
        results.append(StoredDelivery(inbox_id, inbox_id is None))
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


# -- poison deliveries: every processing attempt is counted before it runs ---------------------

POISON = Counter(
    "gitops_inbox_poison_total",
    "Stored deliveries quarantined after failing processing GITOPS_INBOX_MAX_ATTEMPTS times "
    "(raising, or stopping the worker), by source; the sweep no longer re-enqueues them.",
    ["source"],
)


def quarantine_exhausted(
    engine: Engine, max_attempts: int, inbox_id: int | None = None
) -> list[tuple[int, str]]:
    """Quarantines received deliveries whose attempts are spent, with their last error.

    One delivery (`inbox_id`) or all of them (the sweep), in one statement; each is counted
    (gitops_inbox_poison_total) by the call that quarantined it. Their (id, source).
    """
    done = table.quarantine_spent(engine, max_attempts, inbox_id)
    for quarantined_id, source in done:
        POISON.labels(source).inc()
        log.warning(
            "delivery quarantined after %d failed processing attempts",
            max_attempts,
            extra={"inbox_id": quarantined_id, "source": source},
        )
    return done
