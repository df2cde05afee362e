"""Redis loses everything while requests are in flight: PostgreSQL is enough to finish them."""

from __future__ import annotations

import time

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.figures import record
from tests.e2e.world import World

pytestmark = pytest.mark.e2e


def test_flush_while_requests_are_in_flight(world: World) -> None:
    """Redis emptied (FLUSHDB of the database the processes use: the bot uses no other) with
    requests of both orders mid-way: every one still reaches VALIDATED once. Not FLUSHALL: on
    a shared server that also empties the other test process's database mid-test."""
    world.approvals.decide_after = 1.0
    ops = [world.submit(flow) for flow in (Flow.APPROVE_FIRST, Flow.MR_FIRST) * 3]
    world.wait_state(ops[-1], S.MR_CREATING, timeout=20)
    in_flight = {op_id: world.state(op_id) for op_id in ops}
    flushed_at = time.monotonic()
    world.redis.flushdb()
    world.wait_all(ops, S.VALIDATED, timeout=90)
    converged = time.monotonic() - flushed_at
    assert any(state is not S.VALIDATED for state in in_flight.values()), in_flight
    for op_id in ops:
        world.wait_ui(op_id)
        effects = world.effects(op_id)
        assert (effects["mrs"], effects["merges"], effects["comments"]) == (1, 1, 1), effects
        assert world.deployed_rows(op_id) == 1
    record("Redis flushed -> all 6 VALIDATED", converged)
    record(
        "Redis flushed: requests still in flight at the flush",
        sum(state is not S.VALIDATED for state in in_flight.values()),
        "of 6",
    )
