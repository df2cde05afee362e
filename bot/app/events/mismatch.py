"""Callbacks that name one change but do not match it: recorded, counted, and nothing moves."""

from __future__ import annotations

import logging

from prometheus_client import Counter

from bot.app.events.handled import EventHandled
from bot.app.events.stale import audit_unmoved
from bot.core.events import Event, Source
from bot.store.engine import Engine

log = logging.getLogger(__name__)

CALLBACK_MISMATCH = Counter(
    "gitops_callback_mismatch_total",
    "Callbacks refused because they do not match the change they name "
    "(project, MR, merge SHA, approval id, change digest or deploy secret), by source.",
    ["source"],
)


def record_mismatch(
    engine: Engine,
    operation_id: str,
    event: Event,
    reason: str,
    *,
    source: str,
    state: str | None = None,
    correlation_id: str | None = None,
) -> EventHandled:
    """An audit row "mismatch: <reason>" (version 0: nothing changed), counted by `source`."""
    CALLBACK_MISMATCH.labels(source).inc()
    detail = f"mismatch: {reason}"
    log.warning(
        "%s callback refused: %s",
        source,
        detail,
        extra={"operation_id": operation_id, "correlation_id": correlation_id},
    )
    audit_unmoved(engine, operation_id, event, detail, Source.WEBHOOK, state, correlation_id)
    return EventHandled(operation_id, stale=detail)
