"""What is lost is found again: dropped jobs, a flushed Redis, lost callbacks; and races."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from bot.app.events.validate import mark_validated
from bot.app.reconcile import run_reconcile
from bot.app.sweep import run_sweep
from bot.core.events import Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store.flags import set_flag
from bot.store.models import utcnow
from tests.builders import make_operation, operation
from tests.workflow.harness import Bot


def later(seconds: float):  # type: ignore[no-untyped-def]
    """A moment `seconds` from now (the sweep and reconciliation take `now` as an argument)."""
    return utcnow() + timedelta(seconds=seconds)


def test_sweep_recovers_a_job_lost_with_its_worker(bot: Bot) -> None:
    """The first job of a request is dropped (worker killed); the sweep re-drives it."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.worker.queue.empty()  # the job is gone, as with a SIGKILLed worker and an expired lease
    bot.settle()
    assert operation(bot.services.engine, op_id)["mr_iid"] is None
    report = run_sweep(bot.services, later(bot.settings.step_timeout + 1))
    assert op_id in report.redriven
    bot.settle()
    assert operation(bot.services.engine, op_id)["mr_iid"] is not None
    assert bot.state(op_id) is S.MR_CREATING


def test_flushed_redis_loses_nothing(bot: Bot) -> None:
    """Redis emptied while requests wait on polls and deliveries wait in the queue: all finish.

    FLUSHDB of the bot's database (it uses no other): on a shared server FLUSHALL would also
    empty the other test process's database and lose its jobs mid-test."""
    first = bot.request(Flow.MR_FIRST, subject_id="svc-1")
    second = bot.request(Flow.APPROVE_FIRST, subject_id="svc-2")
    bot.settle()
    bot.approve(second)  # stored in the inbox, its job queued ...
    bot.services.redis.flushdb()  # ... and lost with every scheduled poll
    bot.settle(advance=3600)
    assert bot.state(second) is S.APPROVAL_SENT
    report = run_sweep(bot.services, later(60))
    assert report.inbox == 1
    bot.settle()
    assert bot.state(second) is S.MR_CREATING
    bot.pass_pipeline(first, deliver=False)
    bot.pass_pipeline(second, deliver=False)
    for _ in range(3):  # two sweep periods of the scheduled polls being gone
        run_sweep(bot.services, later(3 * bot.settings.step_timeout))
        bot.settle(advance=60)
    assert bot.state(first) is S.APPROVAL_SENT
    assert bot.state(second) is S.MERGED


def test_past_the_retry_budget_the_sweep_fails_explicitly(bot: Bot) -> None:
    """A step that never makes progress ends in an explicit failure, not 'processing' forever."""
    set_flag(bot.services.engine, "sweep.retry_budget", 2)
    op_id = bot.request(Flow.MR_FIRST)
    bot.worker.queue.empty()
    for n in range(3):
        run_sweep(bot.services, later((n + 1) * (bot.settings.step_timeout + 1)))
        bot.worker.queue.empty()  # every re-drive is lost too
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.CREATE_FAILED, Step.CREATE_TIMED_OUT)


def test_callback_before_sent_during_the_submit_call(bot: Bot) -> None:
    """The approval system calls back before its submit call has returned: counted once."""

    def call_back_now(op_id: str) -> None:
        assert bot.approve(op_id) == 202  # arrives while we are still SENDING

    bot.approvals.on_submit = call_back_now
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    assert operation(bot.services.engine, op_id)["approval_id"] is not None


def test_overload_is_an_explicit_failure(bot: Bot) -> None:
    """Past the queue bound a new request is refused with an explicit failure step."""
    from bot.core.events import Event as E
    from bot.store.fire import fire

    op_id = bot.request(Flow.APPROVE_FIRST)
    fire(bot.services.engine, TransitionRequest(op_id, E.OVERLOADED, source=Source.API))
    assert operation(bot.services.engine, op_id)["step"] == Step.CREATE_OVERLOADED
    assert bot.state(op_id) is S.CREATE_FAILED


def validated() -> float:
    """The validated counter."""
    return REGISTRY.get_sample_value("gitops_validated_total") or 0.0


def test_deploy_word_before_our_merge_write_is_reconciled(bot: Bot) -> None:
    """The deploy callback beats our MERGED write (so it is stale then); reconciliation later
    matches its stored signal exactly and validates the change once."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.approve(op_id)
    op = operation(bot.services.engine, op_id)
    assert bot.deployed(op_id) == 202  # processed while the operation is still MERGING ...
    bot.worker.burst(until=0)  # ... only the delivery jobs run; nothing else is due yet
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    before = validated()
    young = run_reconcile(bot.services.engine, utcnow(), min_age=120, max_age=86400)
    assert op_id not in young.exact  # too young: its callback may still come
    report = run_reconcile(bot.services.engine, later(300), min_age=120, max_age=86400)
    assert report.exact == [op_id]
    assert bot.state(op_id) is S.VALIDATED
    assert validated() == before + 1
    again = run_reconcile(bot.services.engine, later(300), min_age=120, max_age=86400)
    assert again.exact == []
    assert validated() == before + 1
    assert op["mr_iid"] is not None


def test_watermark_only_where_deployments_run_in_merge_order(db, redis) -> None:  # type: ignore[no-untyped-def]
    """A callback for a later MR of the same project validates an earlier one only where the
    project is declared to deploy in merge order."""
    from bot.store.signals import record_signal

    early = make_operation(db, S.MERGED, subject_id="early")
    record_signal(
        db,
        source="callback",
        project_id="platform/config",
        status="success",
        mr_iid=operation(db, early)["mr_iid"] + 5,
    )
    report = run_reconcile(db, later(300), min_age=120, max_age=86400, dry_run=True)
    assert report.unmatched == [early]
    set_flag(db, "reconcile.watermark_projects", ["platform/config"])
    report = run_reconcile(db, later(300), min_age=120, max_age=86400)
    assert report.watermark == [early]
    assert report.validated == [early]


@pytest.mark.pg
def test_callback_and_reconciliation_racing_validate_once(db) -> None:  # type: ignore[no-untyped-def]
    """Threads validating the same change at once flip it once and count it once."""
    for _ in range(20):
        op_id = make_operation(db, S.MERGED)
        before = validated()
        barrier = threading.Barrier(4)

        def one(op_id: str, barrier: threading.Barrier) -> bool:
            barrier.wait()
            return mark_validated(db, op_id, source=Source.RECONCILE).moved is not None

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: one(op_id, barrier), range(4)))  # noqa: B023
        assert results.count(True) == 1
        assert validated() == before + 1
