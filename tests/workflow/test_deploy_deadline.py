"""A merged change waits for the deployment's word for GITOPS_DEPLOY_TIMEOUT, then is reported
pending ("deploy unconfirmed", DEPLOY_PENDING) by the sweep, once; a late word still validates
it."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.app.events.gitlab import on_merge_request
from bot.app.operator import move
from bot.app.reconcile import run_reconcile
from bot.app.sweep import run_sweep
from bot.core.events import Event
from bot.core.hints import hint_for
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.ingress.gitlab_events import MergeRequestEvent
from bot.store.models import AUDIT, utcnow
from bot.store.operations import touch
from tests.builders import make_operation, operation
from tests.workflow.harness import PROJECT, Bot

PENDING_WORDS = "the deployment pipeline has not confirmed the change yet"


def later(seconds: float) -> datetime:
    """A moment `seconds` from now (the sweep and reconciliation take `now` as an argument)."""
    return utcnow() + timedelta(seconds=seconds)


def merged(bot: Bot) -> str:
    """An MR-first change the bot merged, with no deploy signal (nothing else queued)."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    return op_id


def timed_out_rows(engine: Engine, op_id: str) -> int:
    """Audit rows of DEPLOY_TIMED_OUT for the operation."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(AUDIT.c.id).where(
                AUDIT.c.operation_id == op_id, AUDIT.c.event == Event.DEPLOY_TIMED_OUT.value
            )
        ).all()
    return len(rows)


def test_entering_merged_sets_the_deploy_deadline(bot: Bot) -> None:
    """The merge step's MERGED write carries now + GITOPS_DEPLOY_TIMEOUT as the deadline."""
    before = utcnow()
    op_id = merged(bot)
    op = operation(bot.services.engine, op_id)
    assert op["step"] == Step.HANDLE_MERGED
    deadline = op["deadline_at"].replace(tzinfo=before.tzinfo)
    timeout = timedelta(seconds=bot.settings.deploy_timeout)
    assert before + timeout <= deadline <= utcnow() + timeout


def test_before_the_deadline_the_sweep_leaves_a_merged_change_alone(bot: Bot) -> None:
    """Within GITOPS_DEPLOY_TIMEOUT of the merge nothing happens: it is merged, waiting."""
    op_id = merged(bot)
    report = run_sweep(bot.services, later(bot.settings.deploy_timeout - 60))
    assert report.deploy_pending == []
    assert op_id not in report.redriven
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_MERGED
    assert timed_out_rows(bot.services.engine, op_id) == 0


def test_past_the_deadline_it_becomes_deploy_pending_once_and_a_late_word_validates(
    bot: Bot,
) -> None:
    """No callback, nothing reconciliation finds: past the deadline the sweep reports it
    pending exactly once (a second sweep changes nothing); the status comment and the API show
    the pending hint; a late deploy callback still validates it."""
    engine = bot.services.engine
    op_id = merged(bot)
    first = run_sweep(bot.services, later(bot.settings.deploy_timeout + 1))
    assert first.deploy_pending == [op_id]
    op = operation(engine, op_id)
    assert (bot.state(op_id), op["step"], op["deadline_at"]) == (
        S.MERGED,
        Step.DEPLOY_PENDING,
        None,
    )
    again = run_sweep(bot.services, later(3 * bot.settings.deploy_timeout))
    assert again.deploy_pending == []
    assert op_id not in again.redriven
    assert op_id not in again.expired
    assert operation(engine, op_id)["version"] == op["version"]
    assert timed_out_rows(engine, op_id) == 1

    bot.settle()  # the sweep queued the outbox: the status comment is rewritten
    notes = [n.body for n in bot.gitlab.mr(PROJECT, op["mr_iid"]).notes.values()]
    status = [body for body in notes if "GitOps" in body]
    assert len(status) == 1
    assert PENDING_WORDS in status[0]
    assert "DEPLOY_PENDING (10504)" in status[0]
    assert hint_for(S.MERGED, Step.DEPLOY_PENDING).kind == "pending"
    answer = bot.client.get(
        f"/api/v1/changes/{op_id}", headers={"Authorization": "Bearer api-token"}
    )
    assert answer.status_code == 200
    body = answer.get_json()
    assert (body["step"], body["step_code"]) == ("DEPLOY_PENDING", 10504)
    assert body["hint"]["kind"] == "pending"
    assert PENDING_WORDS in body["hint"]["text"]

    assert bot.deployed(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED
    assert operation(engine, op_id)["step"] == Step.CALLBACK_VALIDATED


def test_reconciliation_validates_a_deploy_pending_change(bot: Bot) -> None:
    """The deploy word came before our MERGED write (stale then, stored as a signal); the sweep
    reports the change pending past the deadline; reconciliation still matches and validates it."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.approve(op_id)
    assert bot.deployed(op_id) == 202  # processed while the operation is still MERGING
    bot.worker.burst(until=0)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    timeout = bot.settings.deploy_timeout
    assert run_sweep(bot.services, later(timeout + 1)).deploy_pending == [op_id]
    assert operation(bot.services.engine, op_id)["step"] == Step.DEPLOY_PENDING
    report = run_reconcile(bot.services.engine, later(timeout + 2), min_age=120, max_age=86400)
    assert report.exact == [op_id]
    assert bot.state(op_id) is S.VALIDATED


def test_a_failed_deployment_is_not_turned_into_pending(bot: Bot) -> None:
    """A failed deploy (a failure hint) stays what it is past the deadline."""
    op_id = merged(bot)
    assert bot.deployed(op_id, status="failed") == 202
    bot.settle()
    assert operation(bot.services.engine, op_id)["step"] == Step.CALLBACK_DEPLOY_FAILED
    report = run_sweep(bot.services, later(bot.settings.deploy_timeout + 1))
    assert report.deploy_pending == []
    assert operation(bot.services.engine, op_id)["step"] == Step.CALLBACK_DEPLOY_FAILED


def test_operator_retry_of_a_deploy_pending_change_waits_afresh(bot: Bot) -> None:
    """A retry puts it back to waiting (HANDLE_MERGED) with a new deadline: the next sweep
    leaves it, a sweep past the new deadline reports it pending again."""
    op_id = merged(bot)
    timeout = bot.settings.deploy_timeout
    run_sweep(bot.services, later(timeout + 1))
    move(bot.services, op_id, Event.RETRY, actor="ops", queue_reaches_bot=False)
    op = operation(bot.services.engine, op_id)
    assert op["step"] == Step.HANDLE_MERGED
    assert run_sweep(bot.services, later(60)).deploy_pending == []
    assert run_sweep(bot.services, later(timeout + 1)).deploy_pending == [op_id]


def test_merged_by_gitlab_webhook_sets_the_deadline_too(db: Engine) -> None:
    """The MR merged (GitLab's merge event reaches the bot first): the same deadline."""
    op_id = make_operation(db, S.MERGING)
    touch(db, op_id, project_id=14)
    op = operation(db, op_id)
    event = MergeRequestEvent(
        project_id=14,
        project_path="platform/config",
        iid=op["mr_iid"],
        action="merge",
        state="merged",
        source_branch="gitops/x",
        target_branch="main",
        head_sha="a" * 40,
        merge_commit_sha="b" * 40,
        detailed_merge_status=None,
    )
    before = utcnow()
    services = SimpleNamespace(engine=db, settings=SimpleNamespace(deploy_timeout=900))
    handled = on_merge_request(services, event, "key-1")  # type: ignore[arg-type]
    assert handled.moved is not None
    after = operation(db, op_id)
    assert after["step"] == Step.HANDLE_MERGED
    deadline = after["deadline_at"].replace(tzinfo=before.tzinfo)
    assert before + timedelta(seconds=900) <= deadline <= utcnow() + timedelta(seconds=900)


def test_a_merged_change_without_a_deadline_counts_from_its_last_move(bot: Bot) -> None:
    """One merged before this deadline existed (no deadline) is found once it has not moved
    for GITOPS_DEPLOY_TIMEOUT, not before."""
    op_id = merged(bot)
    touch(bot.services.engine, op_id, deadline_at=None)
    timeout = bot.settings.deploy_timeout
    assert run_sweep(bot.services, later(timeout - 60)).deploy_pending == []
    assert run_sweep(bot.services, later(timeout + 1)).deploy_pending == [op_id]
