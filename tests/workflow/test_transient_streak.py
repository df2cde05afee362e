"""Transient failures are counted per step: progress starts the backoff and the budget again."""

from __future__ import annotations

from datetime import timedelta

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.models import utcnow
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot


def test_backoff_starts_again_after_the_step_made_progress(bot: Bot) -> None:
    """Three failed tries to open the MR, then one failed read when merging: that one waits the
    first backoff (2 s), not the fourth (16 s)."""
    bot.gitlab.fail_next(3, 502)
    op_id = bot.request(Flow.MR_FIRST)
    for _ in range(5):
        bot.settle(advance=20)
    assert operation(bot.services.engine, op_id)["mr_iid"] is not None
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    bot.gitlab.fail_next(1, 502, methods="GET", path_endswith=f"/merge_requests/{iid}")
    bot.approve(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert bot.state(op_id) is S.MERGING
    waits = op["deadline_at"] - utcnow() - timedelta(seconds=bot.settings.step_timeout)
    assert waits <= timedelta(seconds=2), waits
    bot.settle(advance=3)
    assert bot.state(op_id) is S.MERGED
    assert bot.gitlab.mr(PROJECT, iid).state == "merged"
