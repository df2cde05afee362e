"""Deployment callbacks that never count: reconciliation validates the change, exactly once."""

from __future__ import annotations

import json
import time

import pytest
import requests

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.flags import set_flag
from tests.e2e.cluster import holds_for, wait_until
from tests.e2e.world import BOT_HOOK, PROJECT, SECRETS, World

pytestmark = pytest.mark.e2e


def deployed_by(world: World, op_id: str) -> list[str]:
    """The sources of the operation's `deployed` transitions."""
    return [
        r["source"] for r in world.audit(op_id) if r["event"] == "deployed" and r["version"] > 0
    ]


def late_deploy_callback(world: World, op_id: str) -> int:
    """The lost callback turns up after all (a re-send by the deployment pipeline)."""
    op = world.op(op_id)
    body = {"project_id": op["project_id"], "mr_iid": op["mr_iid"], "status": "success"}
    return requests.post(
        f"{world.web[0]}/webhooks/deploy",
        data=json.dumps({**body, "sha": op["merge_commit_sha"]}),
        headers={"X-Deploy-Token": SECRETS["deploy"], "Content-Type": "application/json"},
        timeout=10,
    ).status_code


def test_callback_before_the_merge_was_recorded_is_reconciled(world: World) -> None:
    """The deploy callback beats the bot's own record of the merge (stale then); reconciliation
    matches it by project and MR and validates the change once."""
    world.relay.pause(BOT_HOOK)  # GitLab's merge event to the bot is late
    world.gitlab.hang_seconds = 3  # and so is the merge call's answer (the bot waits up to 10 s)
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/merge", apply=True)
    op_id = world.submit(Flow.APPROVE_FIRST)
    world.wait_state(op_id, S.MERGING)
    wait_until(lambda: world.deploy.reports, 30, "the deployment's callback")
    assert world.deploy.reports[0].status in (200, 202)
    world.wait_state(op_id, S.MERGED)
    merged_at = time.monotonic()
    world.relay.resume()
    world.wait_state(op_id, S.VALIDATED)
    assert deployed_by(world, op_id) == ["reconcile"]
    assert time.monotonic() - merged_at >= int(world.cluster.env["GITOPS_RECONCILE_MIN_AGE"]) - 1
    world.wait_ui(op_id)
    assert late_deploy_callback(world, op_id) in (200, 202)
    world.wait_inbox_done()
    assert world.deployed_rows(op_id) == 1


def test_lost_callback_is_reconciled_by_the_watermark(world: World) -> None:
    """A callback lost for good: a later MR's deployment in a merge-order project covers it."""
    set_flag(world.engine, "reconcile.watermark_projects", [PROJECT])
    world.deploy.lose_next(1)
    lost = world.submit(Flow.APPROVE_FIRST)
    world.wait_state(lost, S.MERGED)
    wait_until(lambda: world.deploy.reports, 30, "the deployment (its callback lost)")
    assert world.deploy.reports[0].status == -1
    later = world.submit(Flow.MR_FIRST)
    world.wait_all([later, lost], S.VALIDATED)
    assert deployed_by(world, lost) == ["reconcile"]
    assert deployed_by(world, later) == ["webhook"]
    world.wait_ui(lost)
    assert late_deploy_callback(world, lost) in (200, 202)
    world.wait_inbox_done()
    holds_for(
        lambda: world.deployed_rows(lost) == world.deployed_rows(later) == 1,
        3 * int(world.cluster.env["GITOPS_RECONCILE_INTERVAL"]),
        "one deployed transition each, while reconciliation keeps running",
    )
