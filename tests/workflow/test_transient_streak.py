"""Transient failures are counted per step: progress starts the backoff and the budget again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from bot.app.steps import waits
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.models import utcnow
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot


def test_backoff_starts_again_after_the_step_made_progress(bot: Bot) -> None:
    """Three failed tries to open the MR, then a failed read when merging: that one waits the
    first backoff (1 s), not the fourth (8 s)."""
    bot.gitlab.fail_next(3, 502)
    op_id = bot.request(Flow.MR_FIRST)
    for _ in range(5):
        bot.settle(advance=20)
    assert operation(bot.services.engine, op_id)["mr_iid"] is not None
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    # the read and its immediate resend both fail
    bot.gitlab.fail_next(2, 502, methods="GET", path_endswith=f"/merge_requests/{iid}")
    bot.approve(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert bot.state(op_id) is S.MERGING
    waits = op["deadline_at"] - utcnow() - timedelta(seconds=bot.settings.step_timeout)
    assert waits <= timedelta(seconds=1), waits
    bot.settle(advance=2)
    assert bot.state(op_id) is S.MERGED
    assert bot.gitlab.mr(PROJECT, iid).state == "merged"


def test_retries_back_off_to_a_minute_and_give_up_after_about_two_hours(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitLab answers 502 to every call: opening the MR is tried again after 1, 2, 4 ... s,
    never more than 60 s apart (a request moves within a minute of GitLab coming back), and
    failed with the reason only after MAX_TRANSIENT tries in a row, about two hours."""
    delays: list[float] = []
    real_drive_in = waits.drive_in

    def recording(services: Any, op: Any, seconds: float, now: Any, **kw: Any) -> None:
        delays.append(seconds)
        real_drive_in(services, op, seconds, now, **kw)

    monkeypatch.setattr(waits, "drive_in", recording)
    bot.gitlab.fail_next(100_000, 502)
    op_id = bot.request(Flow.MR_FIRST)
    # the in-process worker runs every retry due before `advance` (wall clock) is over; on a
    # loaded machine a retry may be enqueued just after one settle's horizon, so settle again
    # until the streak has ended. Each settle runs at least the next retry (it falls due within
    # the cap, from before the settle began), so MAX_TRANSIENT settles always reach the end
    # (bounded: a streak that never ends still fails below)
    for _ in range(waits.MAX_TRANSIENT + 1):
        bot.settle(advance=waits.STEP_BACKOFF_CAP + 1)
        if bot.state(op_id) is S.CREATE_FAILED:
            break
    expected = [min(2.0**n, 60.0) for n in range(waits.MAX_TRANSIENT)]
    assert delays == expected
    assert 1.5 * 3600 <= sum(delays) <= 2.5 * 3600
    assert bot.state(op_id) is S.CREATE_FAILED
    error = operation(bot.services.engine, op_id)["error_detail"]
    assert error.startswith("gave up after repeated failures: ")


def test_approve_5xx_more_often_than_its_refusal_budget_does_not_fail_the_request(
    bot: Bot,
) -> None:
    """Six 502s in a row on the approve POST (the refusal budget, approval.max_retries, is 3):
    GitLab's trouble is retried as transient, and the request is merged with one approval per
    account, not stopped in HANDLE_FAILED."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    bot.gitlab.fail_next(6, 502, methods="POST", path_endswith=f"/merge_requests/{iid}/approve")
    bot.approve(op_id)
    for _ in range(4):
        bot.settle(advance=40)
    assert bot.state(op_id) is S.MERGED, operation(bot.services.engine, op_id)["error_detail"]
    approves = [
        c
        for c in bot.gitlab.calls
        if c.method == "POST" and c.path.endswith(f"/merge_requests/{iid}/approve")
    ]
    assert [c.status for c in approves].count(502) == 6
    assert len(bot.gitlab.mr(PROJECT, iid).approvals) == 2
