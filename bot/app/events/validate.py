"""mark_validated: MERGED -> VALIDATED exactly once, whoever reports it first."""

from __future__ import annotations

import time

from bot import metrics
from bot.app.events.handled import EventHandled
from bot.app.events.stale import record_stale
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState
from bot.errors import NotOwner, UnknownOperation
from bot.store.engine import Engine
from bot.store.fire import CurrentState, TransitionMade, fire_in, record_outcome
from bot.store.tx import Tx
from bot.store.validate import under_validation_locks


def mark_validated(
    engine: Engine,
    operation_id: str,
    *,
    source: Source,
    actor: str | None = None,
    correlation_id: str | None = None,
) -> EventHandled:
    """Locks operation then binding, flips MERGED -> VALIDATED once; counts it after commit.

    The locks (bot/store/validate.py) make a racing callback and reconciliation wait for each
    other instead of both reading MERGED.
    """
    started = time.perf_counter()

    def body(
        conn: Tx, current: CurrentState
    ) -> tuple[CurrentState, TransitionMade | None, str | None]:
        if current.state is not BindingState.MERGED:
            state = current.state.value
            reason = (
                "already validated"
                if current.state is BindingState.VALIDATED
                else f"not merged yet ({state})"
            )
            return current, None, reason
        moved = fire_in(
            conn,
            TransitionRequest(
                operation_id,
                Event.DEPLOYED,
                source=source,
                actor=actor,
                correlation_id=correlation_id,
            ),
            current=current,
        )
        return current, moved, None

    try:
        current, moved, stale = under_validation_locks(engine, operation_id, body)
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
    return EventHandled(operation_id, moved=moved)
