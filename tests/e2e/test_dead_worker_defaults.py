"""A worker SIGKILLed mid-step under the default timings: the change moves again within a
minute, not after GITOPS_STEP_TIMEOUT (600 s).

The step's lease is short (GITOPS_STEP_LEASE, 30 s) and renewed at every GitLab call while the
step runs; a killed worker stops renewing it, and the sweep (every GITOPS_SWEEP_INTERVAL, 20 s)
re-drives an operation whose lease has expired whatever its deadline. So the worst case is
lease + sweep interval = 50 s. The other timings stay the e2e world's short ones, except the
ones that decide this: the step timeout (and with it the lease) and the sweep interval are the
defaults, taken from Settings.
"""

from __future__ import annotations

import time

import pytest

from bot.config import Settings
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.test_crashes import finish, kill_the_caller
from tests.e2e.world import World

pytestmark = pytest.mark.e2e

#: The defaults (README "Configuration") of the settings recovery depends on.
DEFAULTS = {
    "GITOPS_STEP_TIMEOUT": str(Settings.step_timeout),
    "GITOPS_STEP_LEASE": str(Settings.step_lease),
    "GITOPS_SWEEP_INTERVAL": str(Settings.sweep_interval),
}
#: How long the scenario gives the change: more than lease + sweep interval, far less than the
#: step timeout the change waited for before (a miss here is a change stuck for ten minutes).
MOVES_WITHIN = 90.0


def test_a_killed_worker_s_change_moves_within_a_minute_under_the_defaults(
    make_world: object,
) -> None:
    """Killed with APPROVALS_GIVEN committed and the merge call held (not applied): the next
    sweep after the lease expired re-drives it; merged once, VALIDATED."""
    assert callable(make_world)
    world: World = make_world(**DEFAULTS)
    world.gitlab.hang_seconds = 30
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/merge", apply=False)
    op_id = world.submit(Flow.MR_FIRST)
    hung = wait_until(world.gitlab.hung_calls, 40, "the held merge call")
    assert isinstance(hung, list)
    assert world.op(op_id)["step"] == Step.HANDLE_APPROVED
    killed_at = kill_the_caller(world, hung[0].remote_port)
    world.gitlab.release_hung()
    world.wait_state(op_id, S.MERGED, timeout=MOVES_WITHIN)
    moved_after = time.monotonic() - killed_at
    record("SIGKILL, default timings: kill -> next transition", moved_after)
    finish(world, op_id, killed_at, "with the default timings")
