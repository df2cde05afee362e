"""Each repository's `.gitops/bot.yml` on the Procfile's processes (policy files on, the
default): two projects with different policy files, one change each, in the same run. The
config repository allows `config/` only, the apps repository `apps/` only; the operator's order
flag is MR first for the first submission and approval first for the second (a policy file
cannot set it). The same path is refused in one with its reason and accepted in the other; each
accepted change takes its order to VALIDATED, and its status comment names the policy commit it
follows. Then the issue's attacks through the real processes: a target branch of a Developer's
own holding a CI file and a policy, a tag named like the target branch, and a policy file that
would loosen the operator's values."""

from __future__ import annotations

import time

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import ONE_EACH, PATHS, PROJECT, SETTLE, World

pytestmark = pytest.mark.e2e

APPS = "platform/apps"
POLICY = ".gitops/bot.yml"
#: PROJECT's policy: config/ only
CONFIG_POLICY = "version: 1\npaths:\n  allowed: [config/]\ndeploy: {timeout: 900}\n"
#: APPS's policy: apps/ only
APPS_POLICY = "version: 1\npaths:\n  allowed: [apps/]\n"
#: a Developer's branch: a CI file that would run with the project's secrets, a loosening policy
HOSTILE = {
    ".gitlab-ci.yml": "steal:\n  script: [env]\n",
    POLICY: "approvals: {approvers: []}\nmerge_queue: {enabled: false}\n",
}
#: the path both are asked to change
SAME = "apps/web.yaml"


def test_two_projects_follow_their_own_policy_files(world: World) -> None:
    """`apps/web.yaml` is refused in the config repository (422 invalid_path naming the allowed
    paths, nothing recorded) and accepted in the apps repository; the config change goes MR
    first, the apps change approval first, both VALIDATED with one MR, merge and approval per
    account, and each status comment says "Policy: `.gitops/bot.yml` at <its commit>"."""
    started = time.monotonic()
    world.add_project(APPS, {"apps/web.yaml": "replicas: 1\n"})
    heads = {
        PROJECT: world.gitlab.push(PROJECT, "main", {POLICY: CONFIG_POLICY}),
        APPS: world.gitlab.push(APPS, "main", {POLICY: APPS_POLICY}),
    }
    calls_before = len(world.gitlab.calls)

    refused = world.submit_answer(Flow.APPROVE_FIRST, subject="web", project=PROJECT, path=SAME)
    body = refused.json()
    assert (refused.status_code, body["error"], body["path"]) == (422, "invalid_path", SAME)
    assert "config/" in body["detail"], body
    assert world.api("GET", "/changes").json()["changes"] == []  # nothing recorded

    ours = world.submit(Flow.MR_FIRST, subject="prod", project=PROJECT, path="config/prod.yaml")
    theirs = world.submit(Flow.APPROVE_FIRST, subject="web", project=APPS, path=SAME)
    for op_id, project, flow in (
        (ours, PROJECT, Flow.MR_FIRST),
        (theirs, APPS, Flow.APPROVE_FIRST),
    ):
        world.wait_state(op_id, S.VALIDATED)
        status = world.status(op_id, web=1)
        assert (status["phase"], status["flow"]) == ("VALIDATED", flow.value), project
        assert status["policy_commit"] == heads[project], project
        assert world.op(op_id)["project"] == project
        assert world.transitions(op_id) == PATHS[flow], world.describe(op_id)
        assert world.mr(op_id).state == "merged"
        assert world.effects(op_id) == ONE_EACH, (project, world.effects(op_id))
        assert world.deployed_rows(op_id) == 1
        world.wait_ui(op_id)
        line = f"- **Policy:** `{POLICY}` at `{heads[project][:7]}`"
        wait_until(
            lambda op_id=op_id, line=line: line in world.status_notes(op_id)[0].body,
            SETTLE,
            f"{project}'s status comment to name its policy commit",
            interval=0.1,
        )
    assert world.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 3\n"
    assert world.gitlab.file(APPS, SAME) == "replicas: 3\n"
    assert world.gitlab.file(PROJECT, SAME) is None  # refused there: never written
    reads = [
        c
        for c in world.gitlab.calls[calls_before:]
        if c.method == "GET" and c.path.endswith(f"/repository/files/{POLICY}")
    ]
    assert len(reads) == 3  # one read per submission (at main's head), the refused one included
    record("policy files: two projects, one change each -> VALIDATED", time.monotonic() - started)


def test_the_issues_attacks_are_refused_by_the_real_processes(world: World) -> None:
    """A target branch of a Developer's own (its CI file, a policy with no approver and the
    queue off): 422 `target_branch_not_allowed`, nothing recorded, no bot branch, no pipeline.
    The same policy on main: 422 `policy_invalid` naming both keys. A tag `main` on the
    attacker's commit: the change follows main's own policy and its branch starts from main's
    head, and reaches VALIDATED without ever holding the tagged content."""
    started = time.monotonic()
    evil = world.gitlab.push(PROJECT, "attack", HOSTILE)
    pipelines = len(world.gitlab.project(PROJECT).pipelines)
    answer = world.submit_answer(Flow.APPROVE_FIRST, subject="a", branch="attack")
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "target_branch_not_allowed"
    assert "not a protected branch" in answer.json()["detail"]
    assert len(world.gitlab.project(PROJECT).pipelines) == pipelines  # nothing ran for it

    world.gitlab.add_tag(PROJECT, "main", evil)
    head = world.gitlab.project(PROJECT).branches["main"]
    op_id = world.submit(Flow.APPROVE_FIRST, subject="b")
    assert world.op(op_id)["policy_sha"] == head
    world.wait_state(op_id, S.VALIDATED)
    branch = world.mr(op_id).source_branch
    assert branch.startswith("gitops/")
    merged = world.gitlab.project(PROJECT).branches["main"]
    assert ".gitlab-ci.yml" not in world.gitlab.state.commits[merged].tree
    assert world.gitlab.file(PROJECT, POLICY) is None

    world.gitlab.push(PROJECT, "main", {POLICY: HOSTILE[POLICY]})
    loosening = world.submit_answer(Flow.APPROVE_FIRST, subject="c")
    body = loosening.json()
    assert (loosening.status_code, body["error"]) == (422, "policy_invalid"), body
    keys = sorted(problem.split(": ")[1] for problem in body["problems"])
    assert keys == ["approvals.approvers", "merge_queue.enabled"]
    assert [c["operation_id"] for c in world.api("GET", "/changes").json()["changes"]] == [op_id]
    record("attacks: hostile target, tag shadow, loosening policy", time.monotonic() - started)
