"""Waits that always resume: a pipeline wait that went pending moves again when the pipeline on
the MR's *current* head finishes -- by its webhook, by a later slow poll, or when an MR event
nudges it -- including after a rebase the bot started, whose new head the operation never
stored. The integrity check still decides whether the new head may be approved and merged."""

from __future__ import annotations

from typing import Any

from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.store.flags import set_flag
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot
from tests.workflow.test_integrity import (
    approved_mr,
    approved_shas,
    main_unchanged,
    stopped_changed,
)

#: pending re-reads come long after the ordinary tiers: `settle(advance=60)` never reaches them
PENDING_EVERY = 600


def merge_calls(bot: Bot) -> list[Any]:
    """Every merge the bot asked GitLab for."""
    return bot.gitlab.calls_matching("PUT", path_endswith="/merge")


def mr_reads(bot: Bot, iid: int) -> int:
    """GETs of the MR itself so far."""
    return len(bot.gitlab.calls_matching("GET", path_endswith=f"/merge_requests/{iid}"))


def pending_after_rebase(bot: Bot) -> tuple[str, dict[str, Any], str]:
    """Approve-first on a fast-forward project that moved on: the bot rebases, the pipeline on
    the rebased head outlives the poll tiers, so the wait goes pending. The operation,
    its row from before the rebase, and the rebased head."""
    set_flag(bot.services.engine, "poll.rebase_tiers", [[5, 2]])
    # once rebased, the new head's pipeline is a pipeline wait (its tiers); the MR's pipeline
    # webhooks arrive, so its waits poll by the covered tiers
    set_flag(bot.services.engine, "poll.pipeline_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.covered_rebase_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.covered_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.pending_tiers", [[PENDING_EVERY, 3]])
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id, op = approved_mr(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    bot.settle()
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_REBASING
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=True)  # its pipeline keeps running
    rebased = bot.gitlab.mr(PROJECT, op["mr_iid"]).sha
    assert rebased is not None
    assert rebased != op["head_sha"]
    bot.settle(advance=60)
    row = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), row["step"]) == (S.MERGING, Step.HANDLE_PIPELINE_PENDING)
    assert row["head_sha"] == op["head_sha"]  # still the head from before the rebase
    assert row["deadline_at"] is None  # pending on purpose: the sweep leaves it alone
    return op_id, op, rebased


def ends_validated_with_one_merge(bot: Bot, op_id: str, rebased: str) -> None:
    """The rebased head was approved and merged once, and the deployment validates it."""
    assert bot.state(op_id) is S.MERGED
    assert operation(bot.services.engine, op_id)["verified_sha"] == rebased
    assert len(merge_calls(bot)) == 1
    assert {call.body.get("sha") for call in merge_calls(bot)} == {rebased}
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 3\n"
    bot.deployed(op_id)
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED


def test_a_pending_wait_after_the_bots_rebase_resumes_on_the_pipeline_webhook(bot: Bot) -> None:
    """The issue's scenario: the pipeline on the rebased head passes after the wait went pending;
    its webhook is judged against the MR's head now (not the stored pre-rebase head), so the
    change resumes at once and ends VALIDATED with one merge."""
    op_id, _, rebased = pending_after_rebase(bot)
    bot.pass_pipeline(op_id)  # the webhook of the pipeline on the rebased head
    bot.settle()  # no time passes: no poll comes due
    ends_validated_with_one_merge(bot, op_id, rebased)


def test_a_pending_wait_resumes_on_a_later_poll_without_any_webhook(bot: Bot) -> None:
    """The same with the webhook lost: the pending wait's slow re-read finds the pipeline on the
    current head passed, one MR read per look."""
    op_id, op, rebased = pending_after_rebase(bot)
    bot.pass_pipeline(op_id, deliver=False)
    reads = mr_reads(bot, op["mr_iid"])
    bot.settle(advance=PENDING_EVERY - 60)
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_PIPELINE_PENDING
    assert mr_reads(bot, op["mr_iid"]) == reads  # nothing before the first pending tier
    bot.settle(advance=PENDING_EVERY + 60)
    ends_validated_with_one_merge(bot, op_id, rebased)


def test_pending_re_reads_are_bounded_by_their_tiers(bot: Bot) -> None:
    """A pipeline that never finishes: the pending wait reads the MR once per pending tier,
    then stays pending without calls (an event or an operator moves it)."""
    op_id, op, _ = pending_after_rebase(bot)
    reads = mr_reads(bot, op["mr_iid"])
    bot.settle(advance=10 * PENDING_EVERY)
    assert mr_reads(bot, op["mr_iid"]) == reads + 3  # poll.pending_tiers [[600, 3]]
    bot.settle(advance=20 * PENDING_EVERY)
    assert mr_reads(bot, op["mr_iid"]) == reads + 3
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_PIPELINE_PENDING


def test_a_push_during_the_pending_wait_is_stopped_by_the_integrity_check(bot: Bot) -> None:
    """Different content pushed while the wait is pending, and its pipeline passes: the webhook
    resumes the wait on the pushed head, and the integrity check stops it -- never approved,
    never merged."""
    op_id, op, rebased = pending_after_rebase(bot)
    pushed = bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 300\n"})
    bot.pass_pipeline(op_id)  # the pushed head's pipeline, with its webhook
    bot.settle()
    row = stopped_changed(bot, op_id)
    assert "new commits were pushed" in row["error_detail"]
    assert pushed not in approved_shas(bot)
    assert approved_shas(bot) <= {op["verified_sha"], rebased}
    assert merge_calls(bot) == []
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).state == "opened"
    assert main_unchanged(bot)


def test_a_push_during_the_pending_wait_found_by_the_slow_poll_also_stops(bot: Bot) -> None:
    """The same push, its pipeline passed without a webhook: the pending re-read checks the new
    head against the approval first and stops the change."""
    op_id, op, _ = pending_after_rebase(bot)
    bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 300\n"})
    bot.pass_pipeline(op_id, deliver=False)
    bot.settle(advance=PENDING_EVERY + 60)
    stopped_changed(bot, op_id)
    assert merge_calls(bot) == []
    assert main_unchanged(bot)


def test_the_mr_update_webhook_of_a_push_nudges_the_pending_wait(bot: Bot) -> None:
    """GitLab's MR update hook for the push, while pending: the wait is re-read at once (the
    pipeline is still running) and the integrity check stops the change without any poll."""
    op_id, op, _ = pending_after_rebase(bot)
    pushed = bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 300\n"})
    headers, body = bot.gitlab.webhook(
        "merge_request",
        project=PROJECT,
        iid=op["mr_iid"],
        action="update",
        token=SECRETS["webhook"],
    )
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code == 202
    bot.settle()  # no time passes
    stopped_changed(bot, op_id)
    assert pushed not in approved_shas(bot)
    assert merge_calls(bot) == []


def test_a_stale_mr_event_nudges_a_pending_wait_to_re_read(bot: Bot) -> None:
    """An MR event that moves nothing (here: a label change, the head unchanged) while the wait
    is pending and its pipeline passed without a webhook: the MR is read at once and the change
    resumes, without waiting for the slow poll."""
    op_id, op, rebased = pending_after_rebase(bot)
    bot.pass_pipeline(op_id, deliver=False)
    headers, body = bot.gitlab.webhook(
        "merge_request",
        project=PROJECT,
        iid=op["mr_iid"],
        action="update",
        token=SECRETS["webhook"],
    )
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code == 202
    bot.settle()  # no time passes
    ends_validated_with_one_merge(bot, op_id, rebased)


def test_a_nudge_while_pending_adds_no_second_poll_chain(bot: Bot) -> None:
    """An MR event's extra look finds the pipeline still running: it schedules nothing, so the
    pending wait still makes exactly its tiers' reads (plus the nudge's one)."""
    op_id, op, _ = pending_after_rebase(bot)
    reads = mr_reads(bot, op["mr_iid"])
    headers, body = bot.gitlab.webhook(
        "merge_request",
        project=PROJECT,
        iid=op["mr_iid"],
        action="approved",
        token=SECRETS["webhook"],
    )
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code == 202
    bot.settle()
    assert mr_reads(bot, op["mr_iid"]) == reads + 1
    bot.settle(advance=30 * PENDING_EVERY)
    assert mr_reads(bot, op["mr_iid"]) == reads + 1 + 3
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_PIPELINE_PENDING


def test_a_pipeline_webhook_for_an_older_commit_stays_stale(bot: Bot) -> None:
    """While pending after the rebase, the pipeline of the pre-rebase head (the head the
    operation still stores) reports again: it is not the MR's head, so nothing moves."""
    set_flag(bot.services.engine, "poll.rebase_tiers", [[5, 2]])
    # once rebased, the new head's pipeline is a pipeline wait (its tiers); the MR's pipeline
    # webhooks arrive, so its waits poll by the covered tiers
    set_flag(bot.services.engine, "poll.pipeline_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.covered_rebase_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.covered_tiers", [[5, 2]])
    set_flag(bot.services.engine, "poll.pending_tiers", [[PENDING_EVERY, 3]])
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id, op = approved_mr(bot)
    iid = op["mr_iid"]
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    old = bot.gitlab.latest_pipeline(PROJECT, iid)
    assert old is not None
    bot.settle()
    bot.gitlab.complete_rebase(PROJECT, iid, ok=True)
    bot.settle(advance=60)
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_PIPELINE_PENDING
    headers, body = bot.gitlab.webhook(
        "pipeline", project=PROJECT, iid=iid, pipeline_id=old.id, token=SECRETS["webhook"]
    )
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code < 300
    bot.settle()
    row = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), row["step"]) == (S.MERGING, Step.HANDLE_PIPELINE_PENDING)
    assert merge_calls(bot) == []
