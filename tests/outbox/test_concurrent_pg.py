"""Two dispatchers at once on PostgreSQL: SKIP LOCKED claims give each row to one of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import insert
from sqlalchemy.engine import Engine

from bot.store.models import OUTBOX, utcnow
from bot.store.outbox import claim
from jobs.outbox import DispatchReport, dispatch
from tests.outbox import Harness, harness, together
from tests.outbox.test_dead import dead_note, race_retries_and_dispatches

pytestmark = pytest.mark.pg


@pytest.fixture
def h(db: Engine) -> Iterator[Harness]:
    """The dispatcher wired to the GitLab double and the approval system's mock."""
    with harness(db) as wired:
        yield wired


def test_claims_released_together_are_disjoint(db: Engine) -> None:
    """Two claimers looping on 120 due rows, started together, never take the same row."""
    now = utcnow()
    with db.begin() as conn:
        conn.execute(
            insert(OUTBOX),
            [
                {
                    "operation_id": f"op-{n}",
                    "effect": "labels",
                    "attempts": 0,
                    "next_attempt_at": now,
                    "created_at": now,
                }
                for n in range(120)
            ],
        )

    def drain() -> list[int]:
        taken: list[int] = []
        for _ in range(100):  # bounded: a claim that never moves its rows must fail, not hang
            batch = claim(db, 7, now)
            if not batch:
                return taken
            taken.extend(row.id for row in batch)
        raise AssertionError("claims never ran dry")

    first, second = together(drain)
    assert set(first).isdisjoint(second)
    assert len(first) + len(second) == 120
    assert len(set(first) | set(second)) == 120


def test_two_dispatchers_send_each_row_once(h: Harness) -> None:
    """Two dispatchers draining 12 operations' rows at once: one note and one labels call each."""
    operations = [h.checking() for _ in range(12)]
    now = utcnow()

    def drain() -> list[DispatchReport]:
        reports = []
        for _ in range(100):
            report = dispatch(limit=3, now=now)
            if not report.claimed:
                return reports
            reports.append(report)
        raise AssertionError("dispatches never ran dry")

    first, second = together(drain)
    reports = first + second
    assert sum(r.claimed for r in reports) == 24
    assert sum(r.sent for r in reports) == 24
    for op_id, iid in operations:
        assert len(h.notes(iid)) == 1, op_id
        assert h.label_calls(iid) == 1, op_id
        assert h.unsent(op_id) == []
    assert h.double.count("POST", path_endswith="/notes") == 12


def test_retries_racing_dispatchers_send_a_dead_note_once(h: Harness) -> None:
    """Operators retrying every dead row while two dispatchers run: the note goes out once."""
    op_id, iid, _, rule = dead_note(h)
    rule.remaining = 0
    race_retries_and_dispatches(h, op_id, iid)
