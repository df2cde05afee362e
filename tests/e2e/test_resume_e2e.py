"""Waits that always resume, on the Procfile's processes: a pipeline slower than the poll tiers
after a rebase the bot started sends the change to pending; when that pipeline then passes, its
webhook (judged against the MR's current head, not the head stored before the rebase) resumes
the change, which ends VALIDATED with one merge."""

from __future__ import annotations

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store.flags import set_flag
from tests.e2e.cluster import wait_until
from tests.e2e.world import PROJECT, SETTLE, World

pytestmark = pytest.mark.e2e


def test_a_slow_pipeline_after_the_bots_rebase_still_ends_validated(world: World) -> None:
    """Rebase and pipeline tiers of 3 s, a pipeline on the rebased head that takes longer:
    pending; then it passes and GitLab's webhook resumes the change (the slow pending poll is
    an hour away)."""
    set_flag(world.engine, "poll.rebase_tiers", [[1, 3]])
    set_flag(world.engine, "poll.pending_tiers", [[3600, 1]])
    world.configure_project(merge_method="ff")
    world.gitlab.rebase_auto_after = 1
    world.deploy.ci_seconds = None  # the check pipelines wait for the test
    op_id = world.submit(Flow.APPROVE_FIRST)
    wait_until(lambda: world.op(op_id)["mr_iid"] is not None, SETTLE, "the MR")
    iid = world.op(op_id)["mr_iid"]
    before = world.op(op_id)["head_sha"]
    world.gitlab.advance_branch(PROJECT)
    world.set_mr_pipeline(iid, "success")  # passes on the head the MR was opened with
    wait_until(lambda: world.op(op_id)["step"] == Step.HANDLE_REBASING, SETTLE, "the bot's rebase")
    # the rebased head's pipeline is a pipeline wait: short tiers from now on (read per poll)
    set_flag(world.engine, "poll.pipeline_tiers", [[1, 3]])
    set_flag(world.engine, "poll.covered_tiers", [[1, 3]])  # its pipeline webhooks arrive
    wait_until(
        lambda: world.op(op_id)["step"] == Step.HANDLE_PIPELINE_PENDING,
        SETTLE,
        "the wait on the rebased head's pipeline to go pending",
        interval=0.2,
    )
    rebased = world.mr(op_id).sha
    assert rebased != before
    assert world.op(op_id)["head_sha"] == before
    world.set_mr_pipeline(iid, "success")  # the rebased head's pipeline, its webhook relayed
    world.wait_state(op_id, S.VALIDATED)
    transitions = world.transitions(op_id)
    assert ("MERGING", "MERGING", "rebase_started") in transitions
    assert ("MERGING", "MERGING", "pipeline_timed_out") in transitions
    assert world.effects(op_id)["merges"] == 1
    assert world.mr(op_id).state == "merged"
    assert world.op(op_id)["verified_sha"] == rebased
