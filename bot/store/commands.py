"""MR commands' bookkeeping: the operations an MR carried, a note's earlier row, its transaction.

A note's command runs in one transaction (`in_note_transaction`) that a second run of the same
note waits for (an advisory lock on PostgreSQL; SQLite's IMMEDIATE transactions are serialised
already), tried again when another writer wins a race. Bot/workflow/command_once.py decides
what runs in it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from bot.core.states import BindingState
from bot.core.table import Effect
from bot.errors import Conflict
from bot.store.models import AUDIT, BINDINGS, OPERATIONS, OUTBOX, utcnow

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MrOperation:
    """The operation an MR carries: its id, state, and whether it still owns its binding."""

    id: str
    state: BindingState
    owner: bool
    mr_opened_by_bot: bool
    subject_id: str
    target_key: str


def mr_operations(
    conn: Connection, project_id: int, project_path: str, iid: int
) -> list[MrOperation]:
    """Every operation this MR carried, the one owning its binding first, then newest first."""
    query = (
        select(
            OPERATIONS.c.id,
            OPERATIONS.c.mr_opened_by_bot,
            OPERATIONS.c.subject_id,
            OPERATIONS.c.target_key,
            BINDINGS.c.state,
            BINDINGS.c.operation_id.label("owner_id"),
        )
        .join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
        .where(
            OPERATIONS.c.mr_iid == iid,
            or_(OPERATIONS.c.project_id == project_id, OPERATIONS.c.project == project_path),
        )
        .order_by(OPERATIONS.c.created_at.desc(), OPERATIONS.c.id)
    )
    rows = conn.execute(query).all()
    found = [
        MrOperation(
            r.id,
            BindingState(r.state),
            r.owner_id == r.id,
            bool(r.mr_opened_by_bot),
            r.subject_id,
            r.target_key,
        )
        for r in rows
    ]
    return sorted(found, key=lambda op: not op.owner)  # stable: newest first otherwise


def mr_operations_of(
    engine: Engine, project_id: int, project_path: str, iid: int
) -> list[MrOperation]:
    """mr_operations() in its own connection."""
    with engine.connect() as conn:
        return mr_operations(conn, project_id, project_path, iid)


@dataclass(frozen=True, slots=True)
class NoteRow:
    """The first audit row a note's command wrote: under which key, moving or not, and what."""

    operation_id: str
    version: int
    detail: str | None


def first_note_row(conn: Connection, keys: list[str], correlation_id: str) -> NoteRow | None:
    """The oldest audit row under any of `keys` with this correlation id, if any."""
    row = conn.execute(
        select(AUDIT.c.operation_id, AUDIT.c.version, AUDIT.c.detail)
        .where(
            AUDIT.c.operation_id.in_(keys),
            AUDIT.c.correlation_id == correlation_id,
        )
        .order_by(AUDIT.c.id)
        .limit(1)
    ).one_or_none()
    return None if row is None else NoteRow(str(row.operation_id), row.version, row.detail)


def queue_status_comment(conn: Connection, operation_id: str, *, forget: bool = True) -> None:
    """Queues the status comment's re-render (an outbox row). `forget`: also forget what the
    comment said last and the label set last, so both are written even if nothing changed (a
    person may have deleted or edited the comment, or removed the label); the label is set
    again with the next transition."""
    now = utcnow()
    if forget:
        conn.execute(
            update(OPERATIONS)
            .where(OPERATIONS.c.id == operation_id)
            .values(status_note_hash=None, label_set=None)
        )
    conn.execute(
        insert(OUTBOX).values(
            operation_id=operation_id,
            effect=Effect.STATUS_COMMENT.value,
            attempts=0,
            next_attempt_at=now,
            created_at=now,
        )
    )


def binding_of(conn: Connection, operation_id: str) -> tuple[str, str]:
    """The operation's binding's owner and state (PostgreSQL: the binding locked FOR UPDATE)."""
    query = (
        select(BINDINGS.c.operation_id, BINDINGS.c.state)
        .join(OPERATIONS, OPERATIONS.c.binding_id == BINDINGS.c.id)
        .where(OPERATIONS.c.id == operation_id)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(of=BINDINGS)
    binding = conn.execute(query).one()
    return binding.operation_id, binding.state


def in_connection(engine: Engine, body: Callable[[Connection], T]) -> T:
    """Runs `body` (reads only) in one connection of its own."""
    with engine.connect() as conn:
        return body(conn)


def in_note_transaction(
    engine: Engine, correlation_id: str, body: Callable[[Connection], T], attempts: int
) -> T:
    """Runs `body` in the note's serialised transaction; runs it again, up to `attempts` times,
    when another writer wins the race (Conflict, or the binding's unique key)."""
    for attempt in range(attempts):
        try:
            with engine.begin() as conn:
                _serialise(conn, correlation_id)
                return body(conn)
        except (Conflict, IntegrityError):
            # someone moved the operation (or took the binding) first: read again, and find
            # this note's own row if the other writer was a second delivery of it
            log.info("command raced; trying again", extra={"correlation_id": correlation_id})
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _serialise(conn: Connection, correlation_id: str) -> None:
    """Makes a second run of the same note wait for the first one's commit, then see its rows.

    Without it, on PostgreSQL (READ COMMITTED) a second run could find no earlier row and then
    read the state the first run committed meanwhile, and act again (retry is legal twice in a
    row). A transaction-scoped advisory lock per note closes that gap; SQLite's IMMEDIATE
    transactions are serialised already.
    """
    if conn.dialect.name == "postgresql":
        key = func.hashtextextended(f"gitops-bot:{correlation_id}", 0)
        conn.execute(select(func.pg_advisory_xact_lock(key)))
