"""A worker that dies around the bot's rebase call: the rebase GitLab may have queued is the
bot's own, not a push.

The handling step notes the rebase it is about to ask for (`rebase_asked`: the verified head it
starts from) before the call, and records REBASE_STARTED after it. A worker SIGKILLed (or whose
lease was taken) between the two used to leave a rebased head that the re-driven step took for
new commits pushed after approval: HANDLE_FAILED "changed after approval", for a change nobody
touched (found by the merge queue's end-to-end burst, tests/e2e/test_queue_e2e.py). Now the
re-driven step follows the noted rebase: rebase polls, the new head checked against the
approval, its pipeline, one merge.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest

import bot.app.steps.perform as perform_module
from bot.app.steps.decide import REBASE_ASKED, decide_merge
from bot.app.sweep import run_sweep
from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.gitlab.merge import MergeOutcome, MergeResult
from bot.store.flags import set_flag
from bot.store.models import utcnow
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot
from tests.workflow.test_integrity import approved_mr
from tests.workflow.test_resume import ends_validated_with_one_merge, merge_calls

#: bot.gitlab.merge the module (the package's `merge` is the function of that name)
merge_module = importlib.import_module("bot.gitlab.merge")


class Killed(BaseException):
    """The worker process dies here: nothing after this point of the step runs (no handler
    sees a BaseException that is not an Exception, as nothing runs after a SIGKILL)."""


def behind(bot: Bot) -> tuple[str, dict[str, Any]]:
    """Approve-first on a fast-forward project that moved on: the next handling step rebases."""
    set_flag(bot.services.engine, "poll.rebase_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.pipeline_tiers", [[5, 2]])
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id, op = approved_mr(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    return op_id, op


def rebases(bot: Bot) -> list[Any]:
    """Rebases GitLab accepted (queued)."""
    return bot.gitlab.calls_matching("PUT", path_endswith="/rebase", status=202)


def killed_while_merging(bot: Bot, op_id: str) -> dict[str, Any]:
    """The MR's pipeline passes and the handling step runs until the worker dies; the sweep then
    re-drives it, as after an expired lease. The operation's row as the dead worker left it."""
    bot.pass_pipeline(op_id)
    with pytest.raises(Killed):
        bot.settle()
    row = operation(bot.services.engine, op_id)
    assert bot.state(op_id) is S.MERGING
    assert row["step"] != Step.HANDLE_REBASING  # the rebase's start was never recorded
    assert row["progress"][REBASE_ASKED] == row["verified_sha"]
    return row


def redrive(bot: Bot, op_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dead worker's replacement: the sweep finds the operation and drives it again."""
    monkeypatch.undo()
    # past the step's deadline (a step timeout after its last scheduled look)
    past = utcnow() + timedelta(seconds=2 * bot.settings.step_timeout)
    report = run_sweep(bot.services, past)
    assert op_id in report.redriven
    bot.settle(advance=30)


def test_killed_after_gitlab_queued_the_rebase(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitLab queued (and finished) the rebase, the worker died before REBASE_STARTED: the
    re-drive follows that rebase, checks the rebased head, waits for its pipeline and merges
    it once; GitLab is asked to rebase once."""
    op_id, op = behind(bot)

    def dies_after_the_rebase_call(
        op: Any, result: MergeResult, sha: str, progress: dict[str, Any]
    ) -> Any:
        if result.outcome is MergeOutcome.REBASE_STARTED:
            raise Killed
        return decide_merge(op, result, sha, progress)

    monkeypatch.setattr(perform_module, "decide_merge", dies_after_the_rebase_call)
    killed_while_merging(bot, op_id)
    assert len(rebases(bot)) == 1
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=True)  # its pipeline keeps running
    rebased = bot.gitlab.mr(PROJECT, op["mr_iid"]).sha
    assert rebased is not None
    assert rebased != op["head_sha"]

    redrive(bot, op_id, monkeypatch)
    row = operation(bot.services.engine, op_id)
    assert bot.state(op_id) is S.MERGING, row["error_detail"]
    assert row["verified_sha"] == rebased  # the rebased head checked against the approval
    assert merge_calls(bot) == []  # not before the rebased head's pipeline passed
    bot.pass_pipeline(op_id)
    bot.settle(advance=30)
    ends_validated_with_one_merge(bot, op_id, rebased)
    assert len(rebases(bot)) == 1


def test_killed_before_the_rebase_call_was_sent(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    """The note was written, the worker died before GitLab heard of the rebase: the re-drive
    finds the head unchanged, asks for the rebase then, and merges the rebased head once."""
    op_id, op = behind(bot)
    put_json = merge_module.put_json

    def dies_before_the_rebase_call(gl: Any, path: str, **kw: Any) -> Any:
        if path.endswith("/rebase"):
            raise Killed
        return put_json(gl, path, **kw)

    monkeypatch.setattr(merge_module, "put_json", dies_before_the_rebase_call)
    killed_while_merging(bot, op_id)
    assert rebases(bot) == []

    bot.gitlab.rebase_auto_after = 0  # the rebase asked for now is done by the next read
    redrive(bot, op_id, monkeypatch)
    assert len(rebases(bot)) == 1
    rebased = bot.gitlab.mr(PROJECT, op["mr_iid"]).sha
    assert rebased is not None
    assert rebased != op["head_sha"]
    assert bot.state(op_id) is S.MERGING
    assert merge_calls(bot) == []
    bot.pass_pipeline(op_id)  # the rebased head's pipeline
    bot.settle(advance=30)
    ends_validated_with_one_merge(bot, op_id, rebased)
    assert len(rebases(bot)) == 1
