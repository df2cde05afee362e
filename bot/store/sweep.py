"""The sweep's statements: operations past their deadline, pushing their deadlines on, and the
record of the last run.

One query finds them and one update re-arms those re-driven, whatever their number (bot/app/sweep.py
decides which are re-driven and which expire). Each run ends by upserting one `flags` row under
`LAST_SWEEP_KEY` (not a flag, like the hooks check's result): what it did and when, read by the
scrape (`gitops_last_sweep_timestamp_seconds`, bot/store/gauges.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine

from bot.core.states import WAITS, BindingState, Step, WaitKind
from bot.store.flags import put_row
from bot.store.models import BINDINGS, OPERATIONS

#: States whose operations a running step is responsible for (re-driven past the deadline).
STEP_STATES = tuple(s for s, kind in WAITS.items() if kind in (WaitKind.STEP, WaitKind.PIPELINE))
#: People decide: re-driven (their status read) but never failed by the sweep.
PEOPLE_STATES = tuple(s for s, kind in WAITS.items() if kind is WaitKind.PEOPLE)
#: Rows looked at per run (the rest wait for the next run).
BATCH = 500
#: The `flags` row recording the last sweep (deliberately not a flag).
LAST_SWEEP_KEY = "status.last_sweep"


def overdue(
    engine: Engine, now: datetime, step_timeout: int, limit: int = BATCH
) -> list[tuple[str, str, int]]:
    """(operation id, state, attempts) of operations past their deadline, in one query.

    An operation with no deadline counts as overdue once it has not moved for a step timeout,
    unless it is pending on purpose (steps 105xx) or waits for people or the deployment. One
    whose step lease has expired without being released (its worker was killed mid-step: a
    live step renews its lease) is overdue whatever its deadline says.
    """
    stale_since = now - timedelta(seconds=step_timeout)
    query = (
        select(OPERATIONS.c.id, BINDINGS.c.state, OPERATIONS.c.attempts)
        .join(BINDINGS, BINDINGS.c.operation_id == OPERATIONS.c.id)
        .where(
            BINDINGS.c.state.in_([*STEP_STATES, *PEOPLE_STATES]),
            or_(
                OPERATIONS.c.deadline_at < now,
                and_(
                    OPERATIONS.c.deadline_at.is_(None),
                    OPERATIONS.c.updated_at < stale_since,
                    OPERATIONS.c.step < 10500,
                ),
                and_(OPERATIONS.c.lease_owner.is_not(None), OPERATIONS.c.lease_until < now),
            ),
        )
        .order_by(OPERATIONS.c.deadline_at)
        .limit(limit)
    )
    with engine.connect() as conn:
        return [(r.id, str(r.state), int(r.attempts)) for r in conn.execute(query)]


def rearm(engine: Engine, operation_ids: Sequence[str], now: datetime, step_timeout: int) -> None:
    """Counts one re-drive of each operation and gives it a step timeout from `now` (one update)."""
    with engine.begin() as conn:
        conn.execute(
            update(OPERATIONS)
            .where(OPERATIONS.c.id.in_(operation_ids))
            .values(
                attempts=OPERATIONS.c.attempts + 1,
                deadline_at=now + timedelta(seconds=step_timeout),
            )
        )


def deploy_overdue(
    engine: Engine, now: datetime, deploy_timeout: int, limit: int = BATCH
) -> list[tuple[str, int]]:
    """(operation id, version) of merged operations still waiting for the deployment's word
    (step HANDLE_MERGED) past their deadline, in one query.

    Entering MERGED sets the deadline (GITOPS_DEPLOY_TIMEOUT); one without a deadline counts
    once it has not moved for that long. DEPLOY_PENDING (what the sweep makes of them) and a
    failed deployment (CALLBACK_DEPLOY_FAILED) are other steps, so neither is found again.
    """
    query = (
        select(OPERATIONS.c.id, OPERATIONS.c.version)
        .join(BINDINGS, BINDINGS.c.operation_id == OPERATIONS.c.id)
        .where(
            BINDINGS.c.state == BindingState.MERGED.value,
            OPERATIONS.c.step == Step.HANDLE_MERGED.value,
            or_(
                OPERATIONS.c.deadline_at < now,
                and_(
                    OPERATIONS.c.deadline_at.is_(None),
                    OPERATIONS.c.updated_at < now - timedelta(seconds=deploy_timeout),
                ),
            ),
        )
        .order_by(OPERATIONS.c.deadline_at)
        .limit(limit)
    )
    with engine.connect() as conn:
        return [(r.id, int(r.version)) for r in conn.execute(query)]


def record_sweep(engine: Engine, now: datetime, did: dict[str, int]) -> None:
    """Keeps when the sweep last ran to its end and what it did (an upsert of one row)."""
    put_row(engine, LAST_SWEEP_KEY, did, now)
