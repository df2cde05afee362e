"""Both step orders from a REST API submission to VALIDATED, on the Procfile's processes."""

from __future__ import annotations

import time

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.figures import record
from tests.e2e.world import APPROVERS, FILE, PATHS, PROJECT, World

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("flow", [Flow.APPROVE_FIRST, Flow.MR_FIRST])
def test_api_submission_reaches_validated(world: World, flow: Flow) -> None:
    """A change submitted through the API reaches VALIDATED in its order, and its MR shows it."""
    calls_before = len(world.gitlab.calls)
    started = time.monotonic()
    op_id = world.submit(flow, subject=f"svc-{flow.value}")
    world.wait_state(op_id, S.VALIDATED)
    wall = time.monotonic() - started
    world.wait_ui(op_id)
    shown = time.monotonic() - started

    status = world.status(op_id, web=1)
    assert (status["phase"], status["flow"]) == ("VALIDATED", flow.value)
    assert world.transitions(op_id) == PATHS[flow], world.describe(op_id)
    mr = world.mr(op_id)
    assert status["mr_url"] == world.gitlab.state.mr_url(world.gitlab.project(PROJECT), mr)
    assert mr.state == "merged"
    assert world.gitlab.file(PROJECT, f"config/svc-{flow.value}.yaml") == "replicas: 3\n"
    assert world.gitlab.file(PROJECT, FILE) == "replicas: 1\n"
    effects = world.effects(op_id)
    assert effects == {
        "mrs": 1,
        "merges": 1,
        "approvals": dict.fromkeys(APPROVERS, 1),
        "comments": 1,
        "approval_requests": 1,
    }
    assert world.deployed_rows(op_id) == 1
    ours = [c for c in world.gitlab.calls[calls_before:] if "/hooks" not in c.path]
    record(f"happy path {flow.value}: submit -> VALIDATED", wall)
    record(f"happy path {flow.value}: submit -> MR shows VALIDATED", shown)
    shown_on_mr = [
        c
        for c in ours
        if "/notes" in c.path
        or (c.method == "PUT" and c.path.endswith(f"/merge_requests/{mr.iid}"))
    ]
    record(f"happy path {flow.value}: GitLab API calls", len(ours), "calls")
    record(f"happy path {flow.value}: of which comment and labels", len(shown_on_mr), "calls")
