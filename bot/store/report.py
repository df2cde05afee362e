"""Where changes wait: the time changes spent in each state over a window, from the audit log.

A *stay* is the time an operation spent in one state: from the transition that entered it to the
one that left it (moves within the state, such as MERGING's rebase or pipeline steps, do not end
it). A stay counts for a window when it ended in it or has not ended: one that has not is counted
to `now` and marked current (only while the operation still owns its binding: a change replaced
by a re-apply waits nowhere). Terminal states (VALIDATED, REJECTED, CLOSED) are not waits and are
left out.

One query, whatever the number of rows: the audit rows (transitions only, not version-0 rows) of
every operation that moved in the window or still owns an unfinished binding, with the
operation's title and project; stays, percentiles and the slowest changes are computed here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select, union
from sqlalchemy.engine import Engine

from bot.core.states import TERMINAL, BindingState
from bot.store.models import AUDIT, BINDINGS, OPERATIONS

#: The slowest changes a report lists, by default.
SLOWEST = 10


@dataclass(frozen=True, slots=True)
class Stay:
    """One operation's time in one state."""

    operation_id: str
    title: str
    project: str
    state: BindingState
    entered_at: datetime
    #: None: not left yet, counted to the report's `now`
    left_at: datetime | None
    seconds: float

    @property
    def current(self) -> bool:
        """Still in the state."""
        return self.left_at is None


@dataclass(frozen=True, slots=True)
class StateFigures:
    """The stays in one state: how many (and how many not over), p50, p95 and the longest."""

    state: BindingState
    count: int
    current: int
    p50: float
    p95: float
    max: float


@dataclass(frozen=True)
class TimeReport:
    """Time in state over a window."""

    since: datetime
    now: datetime
    project: str | None
    #: per state, in the states' order (BindingState), only those with stays
    states: list[StateFigures] = field(default_factory=list)
    #: the changes whose longest stay was longest, longest first: that stay
    slowest: list[Stay] = field(default_factory=list)


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank `p`th percentile of sorted `values` (0 for none)."""
    if not values:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(values)))
    return values[rank - 1]


def time_in_state(
    engine: Engine,
    now: datetime,
    since: datetime,
    *,
    project: str | None = None,
    slowest: int = SLOWEST,
) -> TimeReport:
    """The report for stays that ended after `since` or go on at `now` (of `project` only, if
    given). One query."""
    stays = list(_stays(_rows(engine, since, project), now))
    counted = [s for s in stays if s.left_at is None or s.left_at >= since]
    by_state: dict[BindingState, list[Stay]] = {}
    for stay in counted:
        by_state.setdefault(stay.state, []).append(stay)
    figures = []
    for state in BindingState:
        of_state = by_state.get(state)
        if not of_state:
            continue
        seconds = sorted(s.seconds for s in of_state)
        figures.append(
            StateFigures(
                state=state,
                count=len(seconds),
                current=sum(1 for s in of_state if s.current),
                p50=percentile(seconds, 50),
                p95=percentile(seconds, 95),
                max=seconds[-1],
            )
        )
    longest: dict[str, Stay] = {}
    for stay in counted:
        best = longest.get(stay.operation_id)
        if best is None or stay.seconds > best.seconds:
            longest[stay.operation_id] = stay
    ranked = sorted(longest.values(), key=lambda s: (-s.seconds, s.operation_id))
    return TimeReport(since, now, project, figures, ranked[:slowest])


@dataclass(frozen=True, slots=True)
class _Row:
    operation_id: str
    title: str
    project: str
    owner: bool
    to_state: str
    created_at: datetime


def _rows(engine: Engine, since: datetime, project: str | None) -> list[_Row]:
    """The transitions of every operation that moved since `since` or owns an unfinished
    binding, in order per operation (one query)."""
    moved = select(AUDIT.c.operation_id).where(AUDIT.c.created_at >= since, AUDIT.c.version > 0)
    waiting = select(BINDINGS.c.operation_id).where(
        BINDINGS.c.state.not_in([s.value for s in TERMINAL])
    )
    wanted = union(moved, waiting).subquery()
    query = (
        select(
            AUDIT.c.operation_id,
            AUDIT.c.to_state,
            AUDIT.c.created_at,
            OPERATIONS.c.title,
            OPERATIONS.c.project,
            (BINDINGS.c.operation_id == OPERATIONS.c.id).label("owner"),
        )
        .join(OPERATIONS, OPERATIONS.c.id == AUDIT.c.operation_id)
        .join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
        .where(
            AUDIT.c.version > 0,
            AUDIT.c.operation_id.in_(select(wanted.c.operation_id)),
        )
        .order_by(AUDIT.c.operation_id, AUDIT.c.version, AUDIT.c.id)
    )
    if project is not None:
        query = query.where(OPERATIONS.c.project == project)
    with engine.connect() as conn:
        return [
            _Row(r.operation_id, r.title, r.project, bool(r.owner), r.to_state, r.created_at)
            for r in conn.execute(query)
        ]


def _stays(rows: Iterable[_Row], now: datetime) -> Iterable[Stay]:
    """The stays of ordered transition rows: a new one at each change of state."""
    open_stay: _Row | None = None
    last: _Row | None = None
    for row in rows:
        if last is not None and row.operation_id != last.operation_id:
            yield from _close(open_stay, None, now, owner=last.owner)
            open_stay = None
        if open_stay is None or row.to_state != open_stay.to_state:
            if open_stay is not None:
                yield from _close(open_stay, row.created_at, now, owner=row.owner)
            open_stay = row
        last = row
    if last is not None:
        yield from _close(open_stay, None, now, owner=last.owner)


def _close(
    entered: _Row | None, left_at: datetime | None, now: datetime, *, owner: bool
) -> Iterable[Stay]:
    if entered is None:
        return
    state = BindingState(entered.to_state)
    if state in TERMINAL or (left_at is None and not owner):
        return
    end = now if left_at is None else left_at
    yield Stay(
        entered.operation_id,
        entered.title,
        entered.project,
        state,
        entered.created_at,
        left_at,
        max((end - entered.created_at).total_seconds(), 0.0),
    )
