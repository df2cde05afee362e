"""Dynamic flags changed while requests are in flight: nothing restarts, nothing goes astray."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.cluster import wait_until
from tests.e2e.world import APPROVERS, PATHS, PROJECT, World

pytestmark = pytest.mark.e2e


#: The approval wait shown as pending: the approvers here are held until all five requests wait,
#: which on a slow machine can outlast the e2e step timeout (4 s). A people wait may do that; it
#: is not a step of either order, so the order each request took is read without it.
SHOWN_PENDING = ("APPROVAL_SENT", "APPROVAL_SENT", "approval_timed_out")


def set_order(world: World, order: str) -> None:
    """The operator flips the order flag with the CLI."""
    done = world.cli("flags", "set", "workflow.order", order)
    assert done.returncode == 0, done.stderr


def test_order_flag_flipped_with_both_orders_in_flight(world: World) -> None:
    """Requests of both orders wait for approval when the flag flips; each ends in its own order."""
    world.approvals.decide_after = None
    set_order(world, "approve_first")
    started = {world.submit(): Flow.APPROVE_FIRST for _ in range(2)}
    set_order(world, "mr_first")
    started |= {world.submit(): Flow.MR_FIRST for _ in range(2)}
    world.wait_all(started, S.APPROVAL_SENT)

    set_order(world, "approve_first")  # flipped with all four waiting for their approvers
    late = world.submit()
    started[late] = Flow.APPROVE_FIRST
    world.wait_state(late, S.APPROVAL_SENT)
    for op_id in started:
        world.approvals.decide(op_id, "approved")
    world.wait_all(started, S.VALIDATED)

    for op_id, flow in started.items():
        assert world.status(op_id)["flow"] == flow.value
        path = world.transitions(op_id)
        assert path.count(SHOWN_PENDING) <= 1, world.describe(op_id)
        assert [t for t in path if t != SHOWN_PENDING] == PATHS[flow], world.describe(op_id)
        ext = world.approvals.approval_of(op_id).submission["ext"]  # type: ignore[union-attr]
        assert ("mrId" in ext) == (flow is Flow.MR_FIRST), ext
        assert world.effects(op_id)["merges"] == 1


def approves(world: World, op_id: str, status: int) -> int:
    """Approve calls on the operation's MR that GitLab answered with `status`."""
    iid = world.op(op_id)["mr_iid"]
    return world.gitlab.count("POST", path_endswith=f"/merge_requests/{iid}/approve", status=status)


def test_approve_implementation_flipped_while_check_items_change(
    make_world: Callable[..., World],
) -> None:
    """python-gitlab refused (422, check items now required), flip to direct mid-request; then
    the items change under the direct call's cache: one 422, rebuilt from its body, approved."""
    world = make_world(workers=1)  # one process, one check-items cache: the 422 path is certain
    world.gitlab.require_check_items(PROJECT, ["security-review"])

    first = world.submit(Flow.MR_FIRST)
    wait_until(
        lambda: approves(world, first, 422) >= 1, 40, "python-gitlab's approve to be refused"
    )
    assert world.state(first) is S.MERGING
    done = world.cli("flags", "set", "approve.impl", "direct")
    assert done.returncode == 0, done.stderr
    world.wait_state(first, S.VALIDATED)
    assert approves(world, first, 201) == len(APPROVERS)

    world.gitlab.require_check_items(PROJECT, ["security-review", "change-ticket"])
    second = world.submit(Flow.APPROVE_FIRST)
    world.wait_state(second, S.VALIDATED)
    assert (approves(world, second, 422), approves(world, second, 201)) == (1, len(APPROVERS))
    sent = world.gitlab.calls_matching("POST", path_endswith="/approve", status=201)[-1].body
    assert sent["check_items"] == ["security-review", "change-ticket"]

    world.gitlab.require_check_items(PROJECT, None)
    assert world.cli("flags", "set", "approve.impl", "python-gitlab").returncode == 0
    third = world.submit(Flow.MR_FIRST)
    world.wait_state(third, S.VALIDATED)
    assert (approves(world, third, 422), approves(world, third, 201)) == (0, len(APPROVERS))
    for op_id in (first, second, third):
        effects = world.effects(op_id)
        assert effects["approvals"] == dict.fromkeys(APPROVERS, 1), effects
        assert effects["merges"] == 1
