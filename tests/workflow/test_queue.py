"""The merge queue at work (bot/app/queue.py): on a fast-forward project, changes approved
together merge one after another in the order they entered MERGING; only the head calls
GitLab, rebases and merges; a head that merges, fails or is cancelled lets the next go at once;
an operator may promote a change; a lost drive is made good by the sweep."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from bot.app.operator import move
from bot.app.queue import follow, move_up, queue_recheck
from bot.app.sweep import run_sweep
from bot.core.events import Event
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.queueing import QueueUnavailable
from bot.store import queue
from bot.store.fire import fire
from bot.store.models import utcnow
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot


def changes(bot: Bot, n: int, branch: str = "main", first: int = 0) -> list[str]:
    """n approve-first changes to `branch` (numbered from `first`), each its own file, approved
    and with their MRs' pipelines passed in turn: all in MERGING, queued in that order."""
    ops = [
        bot.request(
            subject_id=f"svc-{i}-{branch}",
            target_key=f"config/svc-{i}.yaml",
            target_branch=branch,
            title=f"Scale svc-{i}",
            files=[{"path": f"config/svc-{i}.yaml", "content": "replicas: 3\n"}],
        )
        for i in range(first, first + n)
    ]
    bot.settle()
    for op_id in ops:
        bot.approve(op_id)
    bot.settle()
    for op_id in ops:
        bot.pass_pipeline(op_id)
        bot.settle()
    return ops


def iid(bot: Bot, op_id: str) -> int:
    value = operation(bot.services.engine, op_id)["mr_iid"]
    assert isinstance(value, int)
    return value


def calls_on(bot: Bot, op_id: str) -> int:
    """GitLab calls made on this change's MR so far."""
    marker = f"/merge_requests/{iid(bot, op_id)}"
    return sum(1 for c in bot.gitlab.calls if marker in c.path)


def rebases(bot: Bot, op_id: str) -> int:
    return len(
        bot.gitlab.calls_matching("PUT", path_endswith=f"/merge_requests/{iid(bot, op_id)}/rebase")
    )


def merges(bot: Bot, op_id: str) -> int:
    return len(
        bot.gitlab.calls_matching("PUT", path_endswith=f"/merge_requests/{iid(bot, op_id)}/merge")
    )


def finish_head(bot: Bot, op_id: str) -> None:
    """The head's rebase completes and the pipeline on the rebased head passes: it merges."""
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_REBASING
    bot.gitlab.complete_rebase(PROJECT, iid(bot, op_id), ok=True)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED, (bot.state(op_id), operation(bot.services.engine, op_id))


def order_of(bot: Bot, ops: list[str]) -> list[str]:
    return [
        e.operation_id
        for e in queue.line(bot.services.engine, PROJECT, "main")
        if e.operation_id in ops
    ]


@pytest.fixture(autouse=True)
def fast_forward(bot: Bot) -> None:
    bot.gitlab.project(PROJECT).merge_method = "ff"


def test_changes_merge_in_queue_order_and_the_waiting_ones_make_no_calls(bot: Bot) -> None:
    """Four changes approved together: the first merges at once; each of the others rebases
    once, when it reaches the head, merges once, and made no GitLab call while it waited."""
    ops = changes(bot, 4)
    assert bot.state(ops[0]) is S.MERGED
    assert order_of(bot, ops) == ops[1:]
    for position, op_id in enumerate(ops[1:], start=1):
        nxt, still = ops[position + 1 : position + 2], ops[position + 2 :]
        before = {w: calls_on(bot, w) for w in still}
        finish_head(bot, op_id)
        assert {w: calls_on(bot, w) for w in still} == before  # waited without a call
        assert [bot.state(w) for w in still] == [S.MERGING] * len(still)
        for w in nxt:  # the next moved up at once, with no time passing
            assert operation(bot.services.engine, w)["step"] == Step.HANDLE_REBASING
    for op_id in ops:
        assert merges(bot, op_id) == 1
        assert bot.state(op_id) is S.MERGED
        bot.deployed(op_id)
    bot.settle()
    assert [bot.state(op_id) for op_id in ops] == [S.VALIDATED] * 4
    assert [rebases(bot, op_id) for op_id in ops] == [0, 1, 1, 1]
    for i in range(4):
        assert bot.gitlab.file(PROJECT, f"config/svc-{i}.yaml") == "replicas: 3\n"


def test_only_the_head_rebases_while_the_others_wait_in_line(bot: Bot) -> None:
    """With the second rebasing at the head, the third and fourth have not been rebased, not
    approved, and wait in MERGING with a sweep deadline a minute away, not a GitLab poll."""
    ops = changes(bot, 4)
    assert operation(bot.services.engine, ops[1])["step"] == Step.HANDLE_REBASING
    for op_id in ops[2:]:
        row = operation(bot.services.engine, op_id)
        assert rebases(bot, op_id) == 0
        assert bot.gitlab.mr(PROJECT, iid(bot, op_id)).approvals == []
        assert row["step"] == Step.HANDLE_STARTED
        assert row["deadline_at"] is not None
        assert row["deadline_at"] - utcnow() <= timedelta(seconds=queue_recheck(bot.settings))
    where = queue.place(bot.services.engine, ops[3])
    assert where is not None
    assert (where.position, where.size, where.head) == (3, 3, ops[1])


def test_a_head_that_fails_leaves_the_queue_and_the_next_goes_at_once(bot: Bot) -> None:
    """The head's rebase conflicts: its next look fails it explicitly, and the next change
    rebases in the same run."""
    ops = changes(bot, 3)
    bot.gitlab.complete_rebase(PROJECT, iid(bot, ops[1]), ok=False)
    bot.settle(advance=20)  # a failed rebase sends no event: the rebase wait's next look
    assert bot.state(ops[1]) is S.HANDLE_FAILED
    assert queue.place(bot.services.engine, ops[1]) is None
    assert operation(bot.services.engine, ops[2])["step"] == Step.HANDLE_REBASING
    assert rebases(bot, ops[2]) == 1
    finish_head(bot, ops[2])


def test_a_cancelled_head_leaves_the_queue_and_the_next_goes_at_once(bot: Bot) -> None:
    """An operator cancels the head mid-rebase: closed, out of the line, the next one rebases."""
    ops = changes(bot, 3)
    move(bot.services, ops[1], Event.CANCEL, actor="ops")
    bot.settle()
    assert bot.state(ops[1]) is S.CLOSED
    assert operation(bot.services.engine, ops[2])["step"] == Step.HANDLE_REBASING
    finish_head(bot, ops[2])


def test_a_cancelled_change_in_line_leaves_it_without_disturbing_the_head(bot: Bot) -> None:
    """Cancelling the third (waiting) changes nothing for the head: no extra call on its MR."""
    ops = changes(bot, 4)
    before = calls_on(bot, ops[1])
    move(bot.services, ops[2], Event.CANCEL, actor="ops")
    bot.settle()
    assert calls_on(bot, ops[1]) == before
    assert order_of(bot, ops) == [ops[1], ops[3]]
    finish_head(bot, ops[1])
    finish_head(bot, ops[3])


def test_a_promoted_change_merges_before_the_ones_ahead_of_it(bot: Bot) -> None:
    """The fourth is promoted while the second is the head (mid-rebase): the fourth goes at
    once, then the second, then the third; one merge each, in that order."""
    ops = changes(bot, 4)
    engine = bot.services.engine
    promoted = queue.promote(engine, ops[3])
    assert promoted is not None
    assert (promoted.position, promoted.is_head) == (1, True)
    assert move_up(bot.services, PROJECT, "main") == ops[3]
    bot.settle()
    assert operation(engine, ops[3])["step"] == Step.HANDLE_REBASING
    finish_head(bot, ops[3])
    assert order_of(bot, ops) == [ops[1], ops[2]]
    finish_head(bot, ops[1])  # its rebase, finished now, is onto the promoted change's merge
    finish_head(bot, ops[2])
    assert [merges(bot, op_id) for op_id in ops] == [1, 1, 1, 1]
    merged_at = {op_id: operation(engine, op_id)["updated_at"] for op_id in ops}
    assert sorted(ops, key=lambda op_id: merged_at[op_id]) == [ops[0], ops[3], ops[1], ops[2]]


def test_each_branch_has_its_own_queue(bot: Bot) -> None:
    """Changes to main and to release do not wait for each other: each branch's first merges."""
    bot.gitlab.push(
        PROJECT, "release", {"config/seed.yaml": "x: 1\n"}, author="gitops-bot", message="release"
    )
    main = changes(bot, 2)
    release = changes(bot, 2, branch="release")
    assert bot.state(main[0]) is S.MERGED
    assert bot.state(release[0]) is S.MERGED
    assert operation(bot.services.engine, main[1])["step"] == Step.HANDLE_REBASING
    assert operation(bot.services.engine, release[1])["step"] == Step.HANDLE_REBASING


def test_a_lost_drive_to_the_next_head_is_made_good_by_the_sweep(
    bot: Bot, monkeypatch: Any
) -> None:
    """Three changes; the drive of the third after the second merges is lost: it waits until
    its deadline, and the sweep's re-drive finds it at the head (no GitLab call before)."""
    ops = changes(bot, 3)
    enqueue = bot.services.queue.enqueue

    def refuse_queue_drives(name: str, *args: Any, **kw: Any) -> Any:
        if str(kw.get("job_id", "")).startswith("queue:"):
            raise QueueUnavailable("redis down")
        return enqueue(name, *args, **kw)

    monkeypatch.setattr(bot.services.queue, "enqueue", refuse_queue_drives)
    before = calls_on(bot, ops[2])
    finish_head(bot, ops[1])
    assert operation(bot.services.engine, ops[2])["step"] == Step.HANDLE_STARTED
    assert calls_on(bot, ops[2]) == before  # nothing drove it
    monkeypatch.undo()
    report = run_sweep(bot.services, utcnow() + timedelta(seconds=queue_recheck(bot.settings) + 1))
    assert ops[2] in report.redriven
    bot.settle()
    assert operation(bot.services.engine, ops[2])["step"] == Step.HANDLE_REBASING
    finish_head(bot, ops[2])


def test_a_head_whose_pipeline_goes_pending_lets_the_next_go(bot: Bot) -> None:
    """The head's pipeline outlives its poll tiers (PIPELINE_TIMED_OUT, as the step's last poll
    fires it): it keeps its place, paused, and the next change goes ahead at once; when its
    pipeline passes later, it is the head again, rebases and merges."""
    engine = bot.services.engine
    ops = changes(bot, 3)
    bot.gitlab.complete_rebase(PROJECT, iid(bot, ops[1]), ok=True)
    row = operation(engine, ops[1])
    made = fire(
        engine,
        TransitionRequest(ops[1], Event.PIPELINE_TIMED_OUT, expected_version=row["version"]),
    )
    assert follow(bot.services, made) == ops[2]
    bot.settle()
    line = queue.line(engine, PROJECT, "main")
    assert [(e.operation_id, e.paused) for e in line] == [(ops[1], True), (ops[2], False)]
    assert operation(engine, ops[2])["step"] == Step.HANDLE_REBASING
    finish_head(bot, ops[2])
    bot.pass_pipeline(ops[1])  # the paused head's pipeline passes: it goes on, behind again
    bot.settle()
    finish_head(bot, ops[1])
    assert [merges(bot, op_id) for op_id in ops] == [1, 1, 1]
