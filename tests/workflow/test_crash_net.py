"""The crash safety net: a step that raises an unexpected exception leaves what a user notices.

For every step drive() runs (bot/app/steps/drive.py STEPS): the step raises an exception nobody
classified, and the operation is either in its declared failure state with "unexpected <Type>:
..." in error_detail, or -- for the steps that declare none -- keeps a deadline the sweep acts
on: a sweep past it re-drives it, and past the retry budget fails it explicitly
(DEADLINE_EXPIRED). Never "processing" for ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot.app.steps import StepContext
from bot.app.steps import drive as driver
from bot.app.sweep import run_sweep
from bot.core.events import Event as E
from bot.core.next_step import Action, next_action
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store.fire import fire
from bot.store.flags import set_flag
from bot.store.models import utcnow
from bot.store.operations import load
from tests.builders import make_operation, operation
from tests.workflow.harness import Bot

BUDGET = 2


class Unforeseen(Exception):
    """What no step classifies: neither transient nor CannotProceed."""


@dataclass(frozen=True)
class Case:
    """Where an operation stands when `action` is its next step, and what a crash leaves."""

    action: Action
    state: S
    flow: Flow
    #: extra events (self-loops) fired after reaching `state`
    then: tuple[E, ...] = ()
    #: the failure state a crash leaves at once (None: the step declares none)
    failed: S | None = None
    #: the state the sweep's DEADLINE_EXPIRED leaves past the budget (None: never failed)
    expired: S | None = None

    @property
    def id(self) -> str:
        return f"{self.action.value}-{self.state.value}"


CASES = [
    Case(Action.SUBMIT_APPROVAL, S.APPROVAL_SENDING, Flow.APPROVE_FIRST, failed=S.CREATE_FAILED),
    Case(Action.AWAIT_APPROVAL, S.APPROVAL_SENT, Flow.APPROVE_FIRST),
    Case(Action.CREATE_MR, S.MR_CREATING, Flow.MR_FIRST, failed=S.CREATE_FAILED),
    Case(
        Action.POLL_PIPELINE,
        S.MR_CREATING,
        Flow.MR_FIRST,
        then=(E.MR_OPENED,),
        failed=S.CREATE_FAILED,
    ),
    Case(Action.START_HANDLING, S.MR_CREATED, Flow.APPROVE_FIRST, expired=S.CREATE_FAILED),
    Case(Action.REQUEST_APPROVAL, S.MR_CREATED, Flow.MR_FIRST, failed=S.CREATE_FAILED),
    Case(Action.HANDLE, S.MERGING, Flow.APPROVE_FIRST, failed=S.HANDLE_FAILED),
    Case(
        Action.POLL_REBASE,
        S.MERGING,
        Flow.APPROVE_FIRST,
        then=(E.REBASE_STARTED,),
        failed=S.HANDLE_FAILED,
    ),
    Case(
        Action.POLL_PENDING,
        S.MR_CREATING,
        Flow.MR_FIRST,
        then=(E.MR_OPENED, E.PIPELINE_TIMED_OUT),
        failed=S.CREATE_FAILED,
    ),
    Case(
        Action.POLL_PENDING,
        S.MERGING,
        Flow.APPROVE_FIRST,
        then=(E.PIPELINE_TIMED_OUT,),
        failed=S.HANDLE_FAILED,
    ),
]


def test_every_step_is_covered() -> None:
    """A step added to STEPS without a case here fails this test."""
    assert {c.action for c in CASES} == set(driver.STEPS)
    for case in CASES:
        declared = driver.declared_failure(case.action, case.state)
        assert (declared is None) == (case.failed is None), case.id
    declare_none = {c.action for c in CASES if c.failed is None}
    assert declare_none == {Action.AWAIT_APPROVAL, Action.START_HANDLING}


def later(seconds: float) -> datetime:
    return utcnow() + timedelta(seconds=seconds)


def crash_in(monkeypatch: pytest.MonkeyPatch, action: Action) -> list[str]:
    """Makes `action`'s step raise Unforeseen; the operation ids it was called for."""
    calls: list[str] = []

    def crashing(ctx: StepContext) -> bool:
        calls.append(ctx.op.id)
        raise Unforeseen("the GitLab answer had no 'sha' key")

    monkeypatch.setitem(driver.STEPS, action, crashing)
    return calls


def at(bot: Bot, case: Case) -> str:
    """An operation whose next step is the case's action (no deadline pending)."""
    engine = bot.services.engine
    op_id = make_operation(engine, case.state, case.flow)
    for event in case.then:
        changes: dict[str, Any] = {}
        if event is E.MR_OPENED:
            changes = {"mr_iid": 7, "mr_opened_by_bot": True}
        fire(engine, TransitionRequest(op_id, event, changes=changes))
    op = load(engine, op_id)
    assert next_action(op.state, op.step, op.flow) is case.action
    return op_id


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_crashing_step_leaves_a_state_or_a_deadline(
    bot: Bot, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = bot.services.engine
    set_flag(engine, "sweep.retry_budget", BUDGET)
    op_id = at(bot, case)
    calls = crash_in(monkeypatch, case.action)
    with pytest.raises(Unforeseen):  # the job fails too: RQ keeps it, the log has the trace
        driver.drive(bot.services, op_id)
    assert calls == [op_id]
    op = operation(engine, op_id)
    assert op["lease_owner"] is None  # released: nothing waits for the crashed worker
    if case.failed is not None:
        assert bot.state(op_id) is case.failed
        assert op["error_detail"].startswith("unexpected Unforeseen: ")
        assert "no 'sha' key" in op["error_detail"]
        return
    # no declared failure: still where it was, and the sweep finds it
    assert bot.state(op_id) is case.state
    clock = 0.0
    for n in range(BUDGET):
        clock += bot.settings.step_timeout + 1
        report = run_sweep(bot.services, later(clock))
        assert (report.redriven, report.expired) == ([op_id], [])
        bot.worker.queue.empty()  # the re-drive the sweep queued, run here in its place:
        with pytest.raises(Unforeseen):
            driver.drive(bot.services, op_id)
        assert operation(engine, op_id)["attempts"] == n + 1
    assert len(calls) == BUDGET + 1
    clock += bot.settings.step_timeout + 1
    report = run_sweep(bot.services, later(clock))
    if case.expired is None:  # people decide: re-driven, never failed by the sweep
        assert (report.redriven, report.expired) == ([op_id], [])
        assert bot.state(op_id) is case.state
        return
    assert (report.redriven, report.expired) == ([], [op_id])
    op = operation(engine, op_id)
    assert bot.state(op_id) is case.expired
    assert op["step"] == Step.CREATE_TIMED_OUT
    assert op["error_detail"] == f"no progress after {BUDGET} re-drives"
    assert op["deadline_at"] is None


def test_a_lost_approval_callback_is_found_by_the_sweeps_redrive(bot: Bot) -> None:
    """The approvers decided but the callback never came: the sweep's re-drive past the
    approval's deadline reads its status and the change goes on."""
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    bot.approvals.decisions[f"apr-{op_id[:8]}"] = "approved"  # its callback is lost
    report = run_sweep(bot.services, later(bot.settings.step_timeout + 1))
    assert report.redriven == [op_id]
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING


def test_the_approval_just_submitted_is_not_read_at_once(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after the submit (the same job) nobody has looked at the approval yet: no status
    read until the sweep's re-drive past its deadline."""
    approval = bot.services.require_clients().approval
    reads: list[str] = []
    real_status = approval.status

    def status(approval_id: str) -> Any:
        reads.append(approval_id)
        return real_status(approval_id)

    monkeypatch.setattr(approval, "status", status)
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    assert reads == []
    run_sweep(bot.services, later(bot.settings.step_timeout + 1))
    bot.settle()
    assert reads == [f"apr-{op_id[:8]}"]
    assert operation(bot.services.engine, op_id)["step"] == Step.APPROVAL_PENDING
