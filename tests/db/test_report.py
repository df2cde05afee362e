"""Time in state across changes (bot/store/report.py): stays from real transitions fired at
chosen moments, their p50/p95/max per state, the slowest changes, the window, the project, and
one query whatever the number of rows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.fire import fire
from bot.store.report import percentile, time_in_state
from bot.store.submit import submit
from tests.builders import PATHS, make_request

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PROJECT = "platform/config"


def walk(
    db: Engine,
    start: datetime,
    durations: Sequence[float],
    project: str = PROJECT,
    title: str | None = None,
) -> str:
    """An approve-first change submitted at `start` that takes the happy path, each transition
    `durations[i]` seconds after the one before, until the durations run out.

    The path: APPROVAL_SENDING d0, APPROVAL_SENT d1, MR_CREATING d2 + d3 (MR opened within it),
    MR_CREATED d4, MERGING d5 + d6 (approvals given within it), MERGED d7, then VALIDATED.
    """
    extra = {} if title is None else {"title": title}
    op_id = submit(db, make_request(project=project, **extra), now=start).operation_id
    at = start
    for (ev, changes), seconds in zip(PATHS[Flow.APPROVE_FIRST], durations, strict=False):
        at += timedelta(seconds=seconds)
        fire(db, TransitionRequest(op_id, ev, changes=changes, now=at))
    return op_id


def changes(db: Engine) -> dict[str, str]:
    """Five changes; B still merging, E (another project) still creating, D long finished."""
    hours = timedelta(hours=1)
    return {
        "A": walk(db, NOW - 8 * hours, [60, 3600, 30, 600, 5, 10, 100, 1200], title="A"),
        "B": walk(db, NOW - 4 * hours, [120, 7200, 300, 300, 10], title="B"),
        "C": walk(db, NOW - 6 * hours, [30, 1800, 60, 840, 20, 50, 250, 600], title="C"),
        "D": walk(db, NOW - 72 * hours, [9000, 9000, 1, 1, 1, 1, 1, 1], title="D"),
        "E": walk(db, NOW - hours, [45, 60], project="other/config", title="E"),
    }


def figures(report: object) -> dict[S, tuple[int, int, float, float, float]]:
    return {
        f.state: (f.count, f.current, f.p50, f.p95, f.max)
        for f in report.states  # type: ignore[attr-defined]
    }


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([], 50) == 0
    assert percentile([7.0], 95) == 7
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == 4
    assert percentile([float(n) for n in range(1, 101)], 95) == 95


def test_time_in_each_state_over_a_day(db: Engine) -> None:
    """Moves within a state (MR opened, approvals given) do not end the stay; a stay not over
    counts to now and is marked; terminal states are no wait; D finished three days ago."""
    ids = changes(db)
    report = time_in_state(db, NOW, NOW - timedelta(hours=24))
    assert figures(report) == {
        S.APPROVAL_SENDING: (4, 0, 45, 120, 120),
        S.APPROVAL_SENT: (4, 0, 1800, 7200, 7200),
        S.MR_CREATING: (4, 1, 630, 3495, 3495),
        S.MR_CREATED: (3, 0, 10, 20, 20),
        S.MERGING: (3, 1, 300, 6470, 6470),
        S.MERGED: (2, 0, 600, 1200, 1200),
    }
    slowest = [(s.operation_id, s.state, s.seconds, s.current) for s in report.slowest]
    assert slowest == [
        (ids["B"], S.APPROVAL_SENT, 7200, False),
        (ids["A"], S.APPROVAL_SENT, 3600, False),
        (ids["E"], S.MR_CREATING, 3495, True),
        (ids["C"], S.APPROVAL_SENT, 1800, False),
    ]
    assert [s.title for s in report.slowest] == ["B", "A", "E", "C"]


def test_the_window_and_the_project(db: Engine) -> None:
    """--since 1h: what ended within the hour and what goes on; --project: that project's."""
    ids = changes(db)
    hour = time_in_state(db, NOW, NOW - timedelta(hours=1))
    assert figures(hour) == {
        S.APPROVAL_SENDING: (1, 0, 45, 45, 45),
        S.APPROVAL_SENT: (1, 0, 60, 60, 60),
        S.MR_CREATING: (1, 1, 3495, 3495, 3495),
        S.MERGING: (1, 1, 6470, 6470, 6470),
    }
    mine = time_in_state(db, NOW, NOW - timedelta(hours=24), project=PROJECT, slowest=2)
    assert figures(mine)[S.MR_CREATING] == (3, 0, 630, 900, 900)
    assert [s.operation_id for s in mine.slowest] == [ids["B"], ids["A"]]
    assert figures(time_in_state(db, NOW, NOW, project="nobody/here")) == {}


def test_a_replaced_change_waits_nowhere(db: Engine) -> None:
    """A failed change re-applied in place (a new operation owns the binding): the old one's
    failure stay ends with it and is not counted as going on."""
    start = NOW - timedelta(hours=2)
    request = make_request()
    old = submit(db, request, now=start).operation_id
    fire(db, TransitionRequest(old, E.PATH_REFUSED, now=start + timedelta(seconds=10)))
    new = submit(db, request, now=start + timedelta(seconds=70)).operation_id
    report = time_in_state(db, NOW, NOW - timedelta(hours=24))
    assert figures(report)[S.APPROVAL_SENDING] == (2, 1, 10, 7130, 7130)
    assert S.CREATE_FAILED not in figures(report)
    assert [s.operation_id for s in report.slowest] == [new, old]


def test_one_query_whatever_the_number_of_rows(db: Engine) -> None:
    selects: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            selects.append(statement)

    walk(db, NOW - timedelta(hours=3), [10, 20])
    event.listen(db, "before_cursor_execute", record)
    try:
        time_in_state(db, NOW, NOW - timedelta(hours=24))
    finally:
        event.remove(db, "before_cursor_execute", record)
    assert len(selects) == 1
    changes(db)
    selects.clear()
    event.listen(db, "before_cursor_execute", record)
    try:
        report = time_in_state(db, NOW, NOW - timedelta(hours=24))
    finally:
        event.remove(db, "before_cursor_execute", record)
    assert len(selects) == 1
    assert len(report.slowest) == 5  # D finished before the window


def observed(state: S) -> tuple[float, float]:
    """gitops_state_seconds for `state`: (count, sum) so far."""
    labels = {"state": state.value}
    count_ = REGISTRY.get_sample_value("gitops_state_seconds_count", labels) or 0.0
    total = REGISTRY.get_sample_value("gitops_state_seconds_sum", labels) or 0.0
    return count_, total


def test_the_histogram_observes_a_stay_when_a_transition_leaves_the_state(db: Engine) -> None:
    """Moves within MR_CREATING (MR opened) do not end the stay; leaving it observes the whole
    of it, once; the fire that carries a held CurrentState (no read) observes the same."""
    before = {s: observed(s) for s in S}
    start = NOW - timedelta(hours=1)
    op_id = walk(db, start, [60, 600, 30])  # now in MR_CREATING for 30 s, MR opened
    assert observed(S.APPROVAL_SENDING) == plus(before[S.APPROVAL_SENDING], 60)
    assert observed(S.APPROVAL_SENT) == plus(before[S.APPROVAL_SENT], 600)
    assert observed(S.MR_CREATING) == before[S.MR_CREATING]
    passed = start + timedelta(seconds=60 + 600 + 30 + 900)
    made = fire(db, TransitionRequest(op_id, E.PIPELINE_PASSED, now=passed))
    assert observed(S.MR_CREATING) == plus(before[S.MR_CREATING], 930)
    assert made.current is not None
    assert made.current.state_since == passed
    started = passed + timedelta(seconds=45)
    fire(db, TransitionRequest(op_id, E.HANDLE_START, now=started), current=made.current)
    assert observed(S.MR_CREATED) == plus(before[S.MR_CREATED], 45)


def plus(seen: tuple[float, float], seconds: float) -> tuple[float, float]:
    return seen[0] + 1, seen[1] + seconds
