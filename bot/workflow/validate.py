"""mark_validated: MERGED -> VALIDATED exactly once, whoever reports it first."""

from __future__ import annotations

import time

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot import metrics
from bot.core.events import Event, Source
from bot.core.states import BindingState
from bot.errors import NotOwner, UnknownOperation
from bot.store.fire import fire_in, load_current, record_outcome
from bot.store.models import BINDINGS, OPERATIONS
from bot.workflow.outcome import Outcome
from bot.workflow.stale import record_stale


def mark_validated(
    engine: Engine,
    operation_id: str,
    *,
    source: Source,
    actor: str | None = None,
    correlation_id: str | None = None,
) -> Outcome:
    """Locks operation then binding, flips MERGED -> VALIDATED once; counts it after commit.

    fire() writes binding state and step together, so there is never a lagging step to repair;
    the locks make a racing callback and reconciliation wait for each other instead of both
    reading MERGED (one would then lose the CAS and be reported as already validated).
    """
    started = time.perf_counter()
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(
                    select(OPERATIONS.c.id).where(OPERATIONS.c.id == operation_id).with_for_update()
                )
                conn.execute(
                    select(BINDINGS.c.id)
                    .where(BINDINGS.c.operation_id == operation_id)
                    .with_for_update()
                )
            current = load_current(conn, operation_id)
            if current.state is not BindingState.MERGED:
                state = current.state.value
                reason = (
                    "already validated"
                    if current.state is BindingState.VALIDATED
                    else f"not merged yet ({state})"
                )
                stale: str | None = reason
                moved = None
            else:
                moved = fire_in(
                    conn,
                    operation_id,
                    Event.DEPLOYED,
                    current=current,
                    source=source,
                    actor=actor,
                    correlation_id=correlation_id,
                )
                stale = None
    except (UnknownOperation, NotOwner) as exc:
        return record_stale(
            engine,
            operation_id,
            Event.DEPLOYED,
            type(exc).__name__,
            source=source,
            correlation_id=correlation_id,
        )
    if moved is None:
        assert stale is not None
        return record_stale(
            engine,
            operation_id,
            Event.DEPLOYED,
            stale,
            source=source,
            state=current.state.value,
            correlation_id=correlation_id,
        )
    record_outcome(Event.DEPLOYED, "success", started)
    metrics.VALIDATED_TOTAL.inc()
    return Outcome(operation_id, moved=moved)
