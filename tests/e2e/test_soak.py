"""The long variant: many requests under random GitLab faults, killed workers, Redis flushed.

Marked `soak`: it runs only with GITOPS_SOAK=1 (and PostgreSQL and Redis). GITOPS_SOAK_REQUESTS
sets the number of requests (40), GITOPS_SOAK_FAULT_RATE the share of GitLab calls answered 5xx
or 429 (0.05), GITOPS_SOAK_SEED the random seed (shown with the figures).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.figures import record
from tests.e2e.world import APPROVERS, World

pytestmark = [pytest.mark.e2e, pytest.mark.soak]


def test_soak_with_faults_kills_and_a_flush(world: World) -> None:
    """Every request reaches VALIDATED with one MR, one merge, one approval per account and
    one comment, whatever GitLab, the workers and Redis did meanwhile."""
    count = int(os.environ.get("GITOPS_SOAK_REQUESTS", "40"))
    seed = int(os.environ.get("GITOPS_SOAK_SEED", str(int(time.time()))))
    rate = float(os.environ.get("GITOPS_SOAK_FAULT_RATE", "0.05"))
    rng = random.Random(seed)
    record("soak seed", seed, "")
    world.gitlab.fail_randomly(rate, (500, 502, 503, 429), seed=seed)
    stop = threading.Event()

    def chaos() -> None:
        kills = 0
        while not stop.wait(1.0):
            if rng.random() < 0.07:  # a worker SIGKILLed about every 15 s
                name = rng.choice([n for n in world.cluster.procs if n.startswith("worker-")])
                world.cluster.kill(name)
                world.cluster.replace(name)
                kills += 1
        record("soak: workers SIGKILLed", kills, "")

    started = time.monotonic()
    agitator = threading.Thread(target=chaos, daemon=True)
    agitator.start()
    ops = []
    try:
        for n in range(count):
            ops.append(world.submit(rng.choice(list(Flow))))
            if n == count // 2:
                world.redis.flushdb()
        world.wait_all(ops, S.VALIDATED, timeout=600 + 10 * count)
    finally:
        stop.set()
        agitator.join(timeout=30)
    record(
        f"soak: {count} requests, {rate:.0%} faults -> all VALIDATED", time.monotonic() - started
    )
    world.gitlab.fail_randomly(0)
    for op_id in ops:
        world.wait_ui(op_id, timeout=120)
        effects = world.effects(op_id)
        assert effects["mrs"] == effects["merges"] == effects["comments"] == 1, effects
        assert effects["approvals"] == dict.fromkeys(APPROVERS, 1), effects
        assert world.deployed_rows(op_id) == 1
