"""What the scrape reads from the database: the state of the changes, the outbox, the inbox, the
last sweep and the last hooks check, in four queries on one connection, whatever the number of
rows (bot/app/gauges.py turns it into the gauges).

Read at scrape time because the web runs several processes and the workers are others: a gauge
one process sets is not what another process's scrape shows, while the database is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.core.states import IN_FLIGHT, WAITS, Step
from bot.store.hooks import RESULT_KEY, HooksReport, stored_report
from bot.store.models import BINDINGS, FLAGS, INBOX, OPERATIONS, OUTBOX
from bot.store.sweep import LAST_SWEEP_KEY

#: Not counted by `gitops_changes`: terminal changes only grow in number (the transitions'
#: counters count them as they happen).
COUNTED = tuple(state.value for state in WAITS)
#: A change whose deadline is further in the past than this is stuck: the sweep (every
#: GITOPS_SWEEP_INTERVAL, 20 s by default) re-drives or fails what is past its deadline, and
#: pushes the deadline on.
STUCK_GRACE = timedelta(minutes=5)
#: The inbox statuses the scrape counts: the backlog and the quarantined deliveries.
INBOX_STATUSES = ("received", "quarantined")


@dataclass(frozen=True, slots=True)
class ChangeGroup:
    """The changes in one binding state and step (only the non-terminal states)."""

    state: str
    step: Step
    count: int
    #: when the longest-staying of them entered the state (bindings.state_since; the binding's
    #: last update for one in its state since before migration 0005)
    since: datetime
    #: those in flight whose deadline is more than STUCK_GRACE past (0 for failed states)
    past_deadline: int


@dataclass(frozen=True, slots=True)
class DatabaseGauges:
    """Everything the scrape shows of the database, read at one moment."""

    changes: tuple[ChangeGroup, ...]
    outbox_pending: int
    #: when the oldest pending outbox row was written (None: none pending)
    outbox_oldest: datetime | None
    outbox_dead: int
    inbox_backlog: int
    inbox_quarantined: int
    #: when the sweep last ran to its end (None: never)
    last_sweep: datetime | None
    #: the last hooks check (None: none yet)
    hooks: HooksReport | None


def read_gauges(engine: Engine, now: datetime) -> DatabaseGauges | None:
    """The database's gauges at `now` (None: the database failed; the scrape goes on without)."""
    try:
        with engine.connect() as conn:
            changes = _changes(conn, now - STUCK_GRACE)
            pending, oldest, dead = _outbox(conn)
            inbox = _inbox(conn)
            rows = {
                row.key: row
                for row in conn.execute(
                    select(FLAGS.c.key, FLAGS.c.value, FLAGS.c.updated_at).where(
                        FLAGS.c.key.in_([LAST_SWEEP_KEY, RESULT_KEY])
                    )
                )
            }
    except SQLAlchemyError:
        return None
    sweep = rows.get(LAST_SWEEP_KEY)
    hooks = rows.get(RESULT_KEY)
    return DatabaseGauges(
        changes=changes,
        outbox_pending=pending,
        outbox_oldest=oldest,
        outbox_dead=dead,
        inbox_backlog=inbox.get("received", 0),
        inbox_quarantined=inbox.get("quarantined", 0),
        last_sweep=None if sweep is None else sweep.updated_at,
        hooks=None if hooks is None else stored_report(hooks.value),
    )


def _changes(conn: Connection, stuck_before: datetime) -> tuple[ChangeGroup, ...]:
    """One grouped query over the non-terminal bindings (the `state` index) and their owners."""
    since = func.coalesce(BINDINGS.c.state_since, BINDINGS.c.updated_at)
    late = case((OPERATIONS.c.deadline_at < stuck_before, 1), else_=0)
    query = (
        select(
            BINDINGS.c.state,
            OPERATIONS.c.step,
            func.count().label("n"),
            func.min(since).label("since"),
            func.sum(late).label("late"),
        )
        .join(OPERATIONS, OPERATIONS.c.id == BINDINGS.c.operation_id)
        .where(BINDINGS.c.state.in_(COUNTED))
        .group_by(BINDINGS.c.state, OPERATIONS.c.step)
    )
    return tuple(
        ChangeGroup(
            state=str(row.state),
            step=Step(row.step),
            count=int(row.n),
            since=row.since,
            past_deadline=int(row.late or 0) if row.state in IN_FLIGHT else 0,
        )
        for row in conn.execute(query)
    )


def _outbox(conn: Connection) -> tuple[int, datetime | None, int]:
    """(pending, when the oldest pending was written, dead) in one query over unsent rows."""
    kind = case((OUTBOX.c.dead_at.is_(None), "pending"), else_="dead").label("kind")
    query = (
        select(kind, func.count().label("n"), func.min(OUTBOX.c.created_at).label("oldest"))
        .where(OUTBOX.c.sent_at.is_(None), OUTBOX.c.dropped_at.is_(None))
        .group_by(kind)
    )
    found = {row.kind: row for row in conn.execute(query)}
    pending, dead = found.get("pending"), found.get("dead")
    return (
        0 if pending is None else int(pending.n),
        None if pending is None else pending.oldest,
        0 if dead is None else int(dead.n),
    )


def _inbox(conn: Connection) -> dict[str, int]:
    """Deliveries by status, for the statuses the scrape shows (the `status` index)."""
    query = (
        select(INBOX.c.status, func.count().label("n"))
        .where(INBOX.c.status.in_(INBOX_STATUSES))
        .group_by(INBOX.c.status)
    )
    return {str(row.status): int(row.n) for row in conn.execute(query)}
