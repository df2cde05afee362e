"""Waiting without sleeping: timeouts become pending, operators retry, rebases are followed."""

from __future__ import annotations

from bot.core.events import Event as E
from bot.core.events import Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store.fire import fire
from bot.store.flags import set_flag
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot


def to_merging(bot: Bot, flow: Flow = Flow.APPROVE_FIRST) -> str:
    """An approve-first request approved, its MR created; the pipeline not finished yet."""
    op_id = bot.request(flow)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    return op_id


def test_pipeline_timeout_is_pending_then_operator_retry_merges(bot: Bot) -> None:
    """A pipeline past its poll tiers leaves a visible pending step; a retry later merges."""
    set_flag(bot.services.engine, "poll.pipeline_tiers", [[5, 2]])
    op_id = to_merging(bot)
    bot.settle(advance=60)
    op = operation(bot.services.engine, op_id)
    assert bot.state(op_id) is S.MR_CREATING
    assert op["step"] == Step.CREATE_PIPELINE_PENDING
    assert op["deadline_at"] is None  # pending on purpose: the sweep leaves it alone
    bot.pass_pipeline(op_id, deliver=False)
    fire(
        bot.services.engine, TransitionRequest(op_id, E.RETRY, source=Source.OPERATOR, actor="ops")
    )
    bot.services.queue.enqueue("jobs.drive.drive", op_id)
    bot.settle(advance=60)
    assert bot.state(op_id) is S.MERGED


def test_a_late_pipeline_webhook_still_moves_a_pending_request(bot: Bot) -> None:
    """After the poll gave up, the pipeline's webhook arriving late moves the request on."""
    set_flag(bot.services.engine, "poll.pipeline_tiers", [[5, 1]])
    op_id = to_merging(bot)
    bot.settle(advance=60)
    assert operation(bot.services.engine, op_id)["step"] == Step.CREATE_PIPELINE_PENDING
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED


def test_behind_target_rebases_then_merges(bot: Bot) -> None:
    """A fast-forward project moved ahead: the bot rebases, waits for the new pipeline, merges."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id = to_merging(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.MERGING, Step.HANDLE_REBASING)
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=True)
    bot.gitlab.new_pipeline_status = "success"
    pipeline = bot.gitlab.latest_pipeline(PROJECT, op["mr_iid"])
    assert pipeline is not None
    bot.gitlab.set_pipeline(PROJECT, pipeline.id, "success")
    bot.settle(advance=60)
    assert bot.state(op_id) is S.MERGED
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).state == "merged"


def test_rebase_conflict_is_an_explicit_failure(bot: Bot) -> None:
    """A rebase that fails on conflicts stops the request at HANDLE_REBASE_CONFLICT."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id = to_merging(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=False, error="Rebase failed: conflict")
    bot.settle(advance=60)
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.HANDLE_FAILED, Step.HANDLE_REBASE_CONFLICT)
    assert "conflict" in op["error_detail"].lower()


def test_rejection_ends_rejected_without_an_mr(bot: Bot) -> None:
    """Approve-first: a rejected request never gets an MR and ends REJECTED."""
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id, decision="rejected")
    bot.settle()
    assert bot.state(op_id) is S.REJECTED
    assert bot.gitlab.project(PROJECT).mrs == {}


def test_order_flag_flipped_with_requests_in_flight(bot: Bot) -> None:
    """Requests started in each order finish in the order they started after the flag flips."""
    from bot.store.submit import NewRequest, submit

    def api_request(subject: str) -> str:
        from bot.store.flags import get_flag

        flow = Flow(get_flag(bot.services.engine, "workflow.order"))
        request = NewRequest(
            subject_id=subject,
            target_key="config/prod.yaml",
            project=PROJECT,
            target_branch="main",
            title=subject,
            flow=flow,
            requested_by="alice",
            files=[{"path": f"config/{subject}.yaml", "content": "x: 1\n"}],
        )
        op_id = submit(bot.services.engine, request).operation_id
        bot.services.queue.enqueue("jobs.drive.drive", op_id)
        return op_id

    first = api_request("svc-first")  # approve-first (the default)
    bot.settle()
    set_flag(bot.services.engine, "workflow.order", "mr_first")
    second = api_request("svc-second")
    bot.settle()
    assert bot.state(first) is S.APPROVAL_SENT
    assert bot.state(second) is S.MR_CREATING
    set_flag(bot.services.engine, "workflow.order", "approve_first")  # flipped back mid-flight
    bot.approve(first)
    bot.settle()
    bot.pass_pipeline(first)
    bot.pass_pipeline(second)
    bot.settle()
    assert bot.state(first) is S.MERGED
    assert bot.state(second) is S.APPROVAL_SENT  # still MR-first: approval after the MR
    bot.approve(second)
    bot.settle()
    assert bot.state(second) is S.MERGED
    assert operation(bot.services.engine, first)["flow"] == "approve_first"
    assert operation(bot.services.engine, second)["flow"] == "mr_first"
