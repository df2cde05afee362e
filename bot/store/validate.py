"""The locking read under MERGED -> VALIDATED: operation, then binding, locked in one transaction.

fire() writes binding state and step together, so there is never a lagging step to repair; the
locks make a racing callback and reconciliation wait for each other instead of both reading
MERGED (one would then lose the CAS and be reported as already validated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from bot.store.fire import CurrentState, load_current
from bot.store.models import BINDINGS, OPERATIONS

T = TypeVar("T")


def under_validation_locks(
    engine: Engine, operation_id: str, body: Callable[[Connection, CurrentState], T]
) -> T:
    """Runs `body` on the operation as read under its row locks (PostgreSQL: operation, then
    binding, FOR UPDATE), in one transaction; raises what load_current() raises."""
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
        return body(conn, load_current(conn, operation_id))
