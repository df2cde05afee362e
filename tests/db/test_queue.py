"""The merge queue in the database: a change is in its branch's line exactly while its operation
is in MERGING, in the order it entered, whatever crashes or races (bot/store/queue.py)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.store import queue
from bot.store.fire import fire
from bot.store.models import MERGE_QUEUE, utcnow
from tests.builders import make_operation

THREADS = 8


def merging(db: Engine, i: int, branch: str = "main", project: str = "platform/config") -> str:
    """A change to `branch` moved into MERGING (so into the queue)."""
    return make_operation(
        db,
        S.MERGING,
        subject_id=f"svc-{i}-{branch}",
        target_key=f"config/svc-{i}.yaml",
        target_branch=branch,
        project=project,
    )


def ids(entries: list[queue.InLine]) -> list[str]:
    return [e.operation_id for e in entries]


def test_a_change_is_in_line_exactly_while_merging_in_the_order_it_entered(db: Engine) -> None:
    """Three changes enter in turn; the first merging leaves the line and the next is head."""
    first, second, third = (merging(db, i) for i in range(3))
    line = queue.line(db, "platform/config", "main")
    assert ids(line) == [first, second, third]
    assert [e.position for e in line] == [1, 2, 3]
    where = queue.place(db, second)
    assert where is not None
    assert (where.position, where.size, where.head, where.is_head) == (2, 3, first, False)
    fire(db, TransitionRequest(first, E.MERGED))
    assert queue.place(db, first) is None
    assert ids(queue.line(db, "platform/config", "main")) == [second, third]
    assert queue.place(db, second).is_head  # type: ignore[union-attr]


@pytest.mark.parametrize("event", [E.MERGE_ERROR, E.MR_CLOSED, E.CANCEL])
def test_a_failed_closed_or_cancelled_change_leaves_its_line(db: Engine, event: E) -> None:
    """Every way out of MERGING takes the change out of the line; the next is head."""
    head, nxt = merging(db, 0), merging(db, 1)
    fire(db, TransitionRequest(head, event))
    assert ids(queue.line(db, "platform/config", "main")) == [nxt]


def test_a_retried_change_goes_to_the_back(db: Engine) -> None:
    """Failed, then retried: it entered MERGING again, so it is last (first approved... again)."""
    head, nxt = merging(db, 0), merging(db, 1)
    fire(db, TransitionRequest(head, E.MERGE_ERROR))
    fire(db, TransitionRequest(head, E.RETRY))
    assert ids(queue.line(db, "platform/config", "main")) == [nxt, head]


def test_lines_are_per_project_and_branch(db: Engine) -> None:
    """Each (project, branch) has its own line and its own head."""
    main0, rel0, main1 = merging(db, 0), merging(db, 1, "release"), merging(db, 2)
    other = merging(db, 3, project="platform/other")
    assert ids(queue.line(db, "platform/config", "main")) == [main0, main1]
    assert ids(queue.line(db, "platform/config", "release")) == [rel0]
    for op_id in (main0, rel0, other):
        assert queue.place(db, op_id).is_head  # type: ignore[union-attr]
    assert not queue.place(db, main1).is_head  # type: ignore[union-attr]
    grouped = {(e.project, e.target_branch) for e in queue.all_lines(db)}
    assert grouped == {
        ("platform/config", "main"),
        ("platform/config", "release"),
        ("platform/other", "main"),
    }


def test_promote_moves_a_change_to_the_front(db: Engine) -> None:
    """An operator's promotion: first in line; the others keep their order behind it."""
    a, b, c = (merging(db, i) for i in range(3))
    moved = queue.promote(db, c)
    assert moved is not None
    assert (moved.position, moved.is_head) == (1, True)
    assert ids(queue.line(db, "platform/config", "main")) == [c, a, b]
    assert queue.promote(db, "no-such-operation") is None


def test_a_paused_change_keeps_its_place_but_lets_the_next_go(db: Engine) -> None:
    """A head whose pipeline wait went pending keeps position 1; the second is head meanwhile."""
    a, b = merging(db, 0), merging(db, 1)
    fire(db, TransitionRequest(a, E.PIPELINE_TIMED_OUT))
    line = queue.line(db, "platform/config", "main")
    assert [(e.operation_id, e.paused) for e in line] == [(a, True), (b, False)]
    assert queue.head_of(line) == b
    assert line[0].step is Step.HANDLE_PIPELINE_PENDING


def test_rows_of_a_replaced_operation_are_dropped_on_read(db: Engine) -> None:
    """A row whose operation no longer holds its binding in MERGING is skipped and deleted."""
    a, b = merging(db, 0), merging(db, 1)
    with db.begin() as conn:  # what a crash between two writes of an older version could leave
        conn.execute(
            MERGE_QUEUE.insert().values(
                operation_id="gone", project="platform/config", target_branch="main",
                rank=0, entered_at=utcnow(),
            )
        )  # fmt: skip
    assert ids(queue.line(db, "platform/config", "main")) == [a, b]
    with db.connect() as conn:
        left = conn.execute(select(MERGE_QUEUE.c.operation_id)).scalars().all()
    assert sorted(left) == sorted([a, b])


def test_take_turn_drives_a_head_once(db: Engine) -> None:
    """The head is taken once (and its status comment queued once); a head waiting in line again
    can be taken again; an empty line has none."""
    a, b = merging(db, 0), merging(db, 1)
    now = utcnow()
    assert queue.take_turn(db, "platform/config", "main", now) == a
    assert queue.take_turn(db, "platform/config", "main", now) is None
    queue.mark_turn(db, a, now, head=False)
    assert queue.take_turn(db, "platform/config", "main", now + timedelta(seconds=1)) == a
    fire(db, TransitionRequest(a, E.MERGED))
    assert queue.take_turn(db, "platform/config", "main", now) == b
    fire(db, TransitionRequest(b, E.MERGED))
    assert queue.take_turn(db, "platform/config", "main", now) is None


# -- races (PostgreSQL) ---------------------------------------------------------------------------


def _released_together(work: list[object], one: object) -> list[object]:
    barrier = threading.Barrier(len(work))

    def run(item: object) -> object:
        barrier.wait()
        return one(item)  # type: ignore[operator]

    with ThreadPoolExecutor(len(work)) as pool:
        return list(pool.map(run, work))


@pytest.mark.pg
def test_twenty_changes_entering_at_once_each_get_one_place(db: Engine) -> None:
    """Twenty operations fire HANDLE_START at the same moment: twenty rows, one each, one line
    with twenty distinct positions and one head."""
    ops = [
        make_operation(db, S.MR_CREATED, subject_id=f"s{i}", target_key=f"k{i}") for i in range(20)
    ]
    _released_together(list(ops), lambda op_id: fire(db, TransitionRequest(op_id, E.HANDLE_START)))
    line = queue.line(db, "platform/config", "main")
    assert sorted(ids(line)) == sorted(ops)
    assert [e.position for e in line] == list(range(1, 21))
    heads = {queue.place(db, op_id).head for op_id in ops}  # type: ignore[union-attr]
    assert len(heads) == 1


@pytest.mark.pg
def test_racing_take_turns_drive_the_head_exactly_once(db: Engine) -> None:
    """Eight workers see the head leave at once and each tries to drive the next: one does,
    50 rounds."""
    wins: Counter[str] = Counter()
    for round_ in range(50):
        a, b = merging(db, 2 * round_, f"b{round_}"), merging(db, 2 * round_ + 1, f"b{round_}")
        fire(db, TransitionRequest(a, E.MERGED))
        now = utcnow()
        taken = _released_together(
            [None] * THREADS,
            lambda _: queue.take_turn(db, "platform/config", f"b{round_}", now),  # noqa: B023
        )
        assert [t for t in taken if t is not None] == [b]
        wins["b"] += 1
    assert wins["b"] == 50


@pytest.mark.pg
def test_a_promotion_racing_the_heads_exit_leaves_one_consistent_line(db: Engine) -> None:
    """The head merges while an operator promotes the last change: the line is the promoted
    change, then the rest in order; the merged one is gone."""
    for round_ in range(20):
        branch = f"p{round_}"
        a, b, c = (merging(db, 3 * round_ + i, branch) for i in range(3))
        _released_together(
            ["merge", "promote"],
            lambda what: (
                fire(db, TransitionRequest(a, E.MERGED))  # noqa: B023
                if what == "merge"
                else queue.promote(db, c)  # noqa: B023
            ),
        )
        assert ids(queue.line(db, "platform/config", branch)) == [c, b]
