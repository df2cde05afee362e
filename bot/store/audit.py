"""Audit rows for what moved nothing (version 0): stale events, mismatches, decided commands.

Version-0 rows keep `count(version > 0) == operation.version`; fire() writes the others.
"""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.engine import Connection, Engine

from bot.store.models import AUDIT, utcnow


def insert_unmoved(
    conn: Connection,
    *,
    operation_id: str,
    event: str,
    source: str,
    detail: str,
    state: str | None = None,
    actor: str | None = None,
    correlation_id: str | None = None,
) -> None:
    """One version-0 audit row (who sent what, and why it moved nothing), cut to its columns."""
    conn.execute(
        insert(AUDIT).values(
            operation_id=operation_id[:36],
            from_state=state,
            to_state=state or "-",
            event=event[:32],
            step=0,
            version=0,
            source=source,
            actor=None if actor is None else actor[:255],
            correlation_id=correlation_id,
            detail=detail[:2000],
            created_at=utcnow(),
        )
    )


def record_unmoved(
    engine: Engine,
    *,
    operation_id: str,
    event: str,
    source: str,
    detail: str,
    state: str | None = None,
    actor: str | None = None,
    correlation_id: str | None = None,
) -> None:
    """insert_unmoved() in its own transaction."""
    with engine.begin() as conn:
        insert_unmoved(
            conn,
            operation_id=operation_id,
            event=event,
            source=source,
            detail=detail,
            state=state,
            actor=actor,
            correlation_id=correlation_id,
        )
