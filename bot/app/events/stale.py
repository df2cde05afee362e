"""Stale events: acknowledged, written to the audit log with the reason, counted, ignored."""

from __future__ import annotations

import logging

from prometheus_client import Counter

from bot.app.events.handled import EventHandled
from bot.core.events import Event, Source
from bot.store.audit import record_unmoved
from bot.store.engine import Engine

log = logging.getLogger(__name__)

STALE_EVENTS = Counter(
    "gitops_stale_events_total",
    "Events that found no owner waiting for them (late, duplicate, replayed), by source.",
    ["source"],
)


def record_stale(
    engine: Engine,
    operation_id: str | None,
    event: Event,
    reason: str,
    *,
    source: Source,
    state: str | None = None,
    correlation_id: str | None = None,
) -> EventHandled:
    """Writes the audit row (version 0: nothing changed) and counts the stale event."""
    STALE_EVENTS.labels(source.value).inc()
    log.info(
        "stale %s ignored: %s",
        event.value,
        reason,
        extra={"operation_id": operation_id, "correlation_id": correlation_id},
    )
    if operation_id is not None:
        audit_unmoved(
            engine, operation_id, event, f"stale: {reason}", source, state, correlation_id
        )
    return EventHandled(operation_id, stale=reason)


def audit_unmoved(
    engine: Engine,
    operation_id: str,
    event: Event,
    detail: str,
    source: Source,
    state: str | None,
    correlation_id: str | None,
) -> None:
    """An audit row for an event that moved nothing (version 0), with why."""
    record_unmoved(
        engine,
        operation_id=operation_id,
        event=event.value,
        source=source.value,
        detail=detail,
        state=state,
        correlation_id=correlation_id,
    )
