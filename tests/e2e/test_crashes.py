"""A worker SIGKILLed at three points of a step: every request still ends right, once.

How each point is reached deterministically: the system the step calls holds the call open (the
fake approval system's held submit, or the GitLab double's "timeout" fault, which applies the
call or not and then keeps the connection), the test finds the worker process that owns the
held connection (its TCP port, looked up in /proc) and SIGKILLs exactly that process while it
is blocked there. A supervisor's restart is imitated by starting a fresh worker of the same
name. Recovery is timed from the kill to the next transition and to VALIDATED.

- before the commit: blocked in the approval submit; the step's transition (APPROVAL_SUBMITTED)
  is not written yet, and the approval system has already recorded the submission;
- after the commit, before the GitLab call: APPROVALS_GIVEN is committed and the merge call is
  held without being applied (as if the process died just before sending it);
- after the GitLab call: the call was applied (an MR created, or the MR merged) and the process
  dies before it hears the answer, so the bot's record is behind GitLab's.
"""

from __future__ import annotations

import time

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import ONE_EACH, SETTLE, World

pytestmark = pytest.mark.e2e


def kill_the_caller(world: World, port: int | None) -> float:
    """SIGKILLs the worker holding the connection from `port`, starts a fresh one; kill time."""
    assert port is not None
    name = wait_until(lambda: world.cluster.pid_of_port(port), 5, f"the owner of port {port}")
    assert isinstance(name, str)
    assert name.startswith("worker-"), name
    killed_at = world.cluster.kill(name)
    world.cluster.replace(name)
    return killed_at


def merged_by(world: World, op_id: str) -> list[str]:
    """The events of the operation's transitions into MERGED."""
    return [event for _, to, event in world.transitions(op_id) if to == S.MERGED.value]


def finish(world: World, op_id: str, killed_at: float, point: str) -> None:
    """Waits for VALIDATED and the MR to show it; records the recovery; checks one effect each."""
    world.wait_state(op_id, S.VALIDATED)
    record(f"SIGKILL {point}: kill -> VALIDATED", time.monotonic() - killed_at)
    world.wait_ui(op_id)
    assert world.effects(op_id) == ONE_EACH, world.effects(op_id)
    assert world.deployed_rows(op_id) == 1


def test_kill_before_the_commit(world: World) -> None:
    """Killed inside the approval submit: re-driven, re-sent with the same key, one approval."""
    world.approvals.decide_after = None
    world.approvals.hold_submits()
    op_id = world.submit(Flow.APPROVE_FIRST)
    held = wait_until(world.approvals.held_now, 30, "the held approval submit")
    assert isinstance(held, list)
    killed_at = kill_the_caller(world, held[0].remote_port)
    world.approvals.release()
    assert world.state(op_id) is S.APPROVAL_SENDING
    world.wait_state(op_id, S.APPROVAL_SENT)
    record("SIGKILL before the commit: kill -> next transition", time.monotonic() - killed_at)
    assert world.approvals.submits(op_id) == 2  # the re-send, answered with the first approval
    world.approvals.decide(op_id, "approved")
    finish(world, op_id, killed_at, "before the commit")


def test_kill_after_the_commit_before_the_gitlab_call(world: World) -> None:
    """Killed with APPROVALS_GIVEN committed and the merge not sent: re-driven, merged once."""
    world.gitlab.hang_seconds = 30
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/merge", apply=False)
    op_id = world.submit(Flow.MR_FIRST)
    hung = wait_until(world.gitlab.hung_calls, 40, "the held merge call")
    assert isinstance(hung, list)
    assert world.op(op_id)["step"] == Step.HANDLE_APPROVED
    killed_at = kill_the_caller(world, hung[0].remote_port)
    world.gitlab.release_hung()
    assert world.mr(op_id).state == "opened"
    world.wait_state(op_id, S.MERGED)
    record("SIGKILL after the commit: kill -> next transition", time.monotonic() - killed_at)
    finish(world, op_id, killed_at, "after the commit")


def test_kill_after_the_gitlab_call_that_created_the_mr(world: World) -> None:
    """Killed after GitLab created the MR, before the answer: the re-drive reuses that MR."""
    world.gitlab.hang_seconds = 30
    world.gitlab.fail_next(
        1, "timeout", methods="POST", path_endswith="/merge_requests", apply=True
    )
    op_id = world.submit(Flow.APPROVE_FIRST)
    hung = wait_until(world.gitlab.hung_calls, 40, "the held MR creation")
    assert isinstance(hung, list)
    killed_at = kill_the_caller(world, hung[0].remote_port)
    world.gitlab.release_hung()
    assert world.op(op_id)["mr_iid"] is None  # GitLab has the MR, the bot has no record of it
    wait_until(lambda: world.op(op_id)["mr_iid"] is not None, 30, "the MR to be recorded")
    record("SIGKILL after the GitLab call: kill -> next transition", time.monotonic() - killed_at)
    finish(world, op_id, killed_at, "after the GitLab call")


def test_kill_after_the_merge_call(world: World) -> None:
    """Killed after GitLab merged, before the answer: GitLab's merge event moves it; one merge."""
    world.gitlab.hang_seconds = 30
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/merge", apply=True)
    op_id = world.submit(Flow.APPROVE_FIRST)
    hung = wait_until(world.gitlab.hung_calls, 40, "the held merge call")
    assert isinstance(hung, list)
    killed_at = kill_the_caller(world, hung[0].remote_port)
    world.gitlab.release_hung()
    # MERGED may last less than one look (the deploy callback follows the merge at once): wait
    # for the transition into it in the audit trail, not for the state itself
    wait_until(lambda: merged_by(world, op_id), SETTLE, "the merge to be recorded")
    assert merged_by(world, op_id) == ["merged"], world.describe(op_id)
    record("SIGKILL after the merge call: kill -> next transition", time.monotonic() - killed_at)
    finish(world, op_id, killed_at, "after the merge call")
