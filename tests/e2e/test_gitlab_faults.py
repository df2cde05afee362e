"""GitLab misbehaves (the double's faults over real HTTP): the bot recovers without a restart."""

from __future__ import annotations

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store.flags import set_flag
from tests.e2e.cluster import wait_until
from tests.e2e.world import APPROVERS, ONE_EACH, PROJECT, World

pytestmark = pytest.mark.e2e


def test_5xx_bursts_and_429_with_and_without_retry_after(world: World) -> None:
    """Bursts of 502/503 and 429s: both requests reach VALIDATED, never early after Retry-After."""
    gitlab = world.gitlab
    gitlab.fail_next(2, 502)
    ops = [world.submit(Flow.APPROVE_FIRST), world.submit(Flow.MR_FIRST)]
    gitlab.fail_next(2, 503, methods="POST")
    gitlab.fail_next(1, 429, methods="POST", path_endswith="/approve", retry_after=3)
    # a 429 without Retry-After on a read every change makes (the integrity check's compare)
    gitlab.fail_next(1, 429, methods="GET", path_endswith="/repository/compare")
    world.wait_all(ops, S.VALIDATED)
    for op_id in ops:
        world.wait_ui(op_id)
        assert world.effects(op_id) == ONE_EACH, world.effects(op_id)
    assert gitlab.faults.pending() == 0
    limited = gitlab.calls_matching("POST", path_endswith="/approve", status=429)[0]
    again = next(
        c
        for c in gitlab.calls_matching("POST", path_endswith="/approve")
        if c.at > limited.at and c.user == limited.user and c.path == limited.path
    )
    assert again.at - limited.at >= 3.0


def test_timeouts_on_merge(world: World) -> None:
    """The merge answer never comes (once applied, once not): each MR merged exactly once."""
    world.gitlab.hang_seconds = 12  # longer than the bot's 10 s GitLab timeout
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/merge", apply=True)
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/merge", apply=False)
    ops = [world.submit(Flow.APPROVE_FIRST), world.submit(Flow.MR_FIRST)]
    world.wait_all(ops, S.VALIDATED)
    assert world.gitlab.faults.pending() == 0
    for op_id in ops:
        world.wait_ui(op_id)
        assert world.effects(op_id) == ONE_EACH, world.effects(op_id)


@pytest.mark.parametrize(("mode", "refusal", "max_retries"), [("old", 401, 0), ("new", 304, 3)])
def test_repeat_approve_on_old_and_new_gitlab(
    world: World, mode: str, refusal: int, max_retries: int
) -> None:
    """The bot's account approved already and the approvals read fails: the repeat approve's
    401 (old GitLab, last attempt) or 304 (new) ends in success, not a failure."""
    world.gitlab.mode = mode
    set_flag(world.engine, "approval.max_retries", max_retries)
    world.deploy.ci_seconds = None  # the check pipeline waits for the test
    op_id = world.submit(Flow.MR_FIRST)
    wait_until(lambda: world.op(op_id)["mr_iid"] is not None, 30, "the MR")
    iid = world.op(op_id)["mr_iid"]
    world.gitlab.approve_as(PROJECT, iid, APPROVERS[0])
    # each approvals read fails, and so does its immediate resend
    world.gitlab.fail_next(4, 500, methods="GET", path_endswith="/approvals")
    pipeline = world.gitlab.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    world.gitlab.set_pipeline(PROJECT, pipeline.id, "success")
    world.wait_state(op_id, S.VALIDATED)
    world.wait_ui(op_id)
    approves = world.gitlab.calls_matching("POST", path_endswith=f"/merge_requests/{iid}/approve")
    assert [(c.user, c.status) for c in approves] == [
        (APPROVERS[0], refusal),
        (APPROVERS[1], 201),
    ]
    assert world.mr(op_id).approvals == [world.gitlab.user(name).id for name in APPROVERS]


def test_rebase_needed_then_conflict(world: World) -> None:
    """Behind the target: rebased, checked again, merged; a rebase that conflicts is a failure."""
    world.configure_project(merge_method="ff")
    world.gitlab.rebase_auto_after = 1
    world.approvals.decide_after = None
    clean, conflicting = world.submit(Flow.MR_FIRST), world.submit(Flow.MR_FIRST)
    world.wait_all([clean, conflicting], S.APPROVAL_SENT)
    world.gitlab.advance_branch(PROJECT)
    world.gitlab.plan_rebase(PROJECT, world.op(conflicting)["mr_iid"], ok=False)
    world.approvals.decide(clean, "approved")
    world.wait_state(clean, S.VALIDATED)
    assert ("MERGING", "MERGING", "rebase_started") in world.transitions(clean)
    world.approvals.decide(conflicting, "approved")
    world.wait_state(conflicting, S.HANDLE_FAILED, fail_on_failed=False)
    world.wait_ui(clean)
    world.wait_ui(conflicting)
    assert world.op(conflicting)["step"] == Step.HANDLE_REBASE_CONFLICT
    status = world.status(conflicting)
    assert status["phase"] == "HANDLE_FAILED"
    assert world.mr(conflicting).state == "opened"
    assert world.effects(clean)["merges"] == 1
    assert world.effects(conflicting)["merges"] == 0
