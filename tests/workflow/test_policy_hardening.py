"""The policy file against hostile or changing input, through the API and the checks before
approval: a deeply nested file is refused like any broken one (422 policy_invalid with its line
and column, not a 500), and the JSON Schemas a change's policy names are read at the commit that
policy was recorded at, so a schema edited on the branch does not change the checks of changes
already in flight."""

from __future__ import annotations

import json
from typing import Any

from bot.core.states import BindingState as S
from bot.core.states import Step
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot

AUTH = {"Authorization": "Bearer api-token"}
RULES = "validators:\n  - glob: 'config/**'\n    schema: schemas/app.json\n"


def schema(maximum: int) -> str:
    """A JSON Schema capping `replicas` at `maximum`."""
    return json.dumps({"type": "object", "properties": {"replicas": {"maximum": maximum}}})


def submit(bot: Bot, content: str = "replicas: 30\n") -> Any:
    """POST /api/v1/changes writing config/prod.yaml in PROJECT's main."""
    body: dict[str, Any] = {
        "subject_id": "svc",
        "target_key": "config/prod.yaml",
        "project": PROJECT,
        "target_branch": "main",
        "title": "Scale",
        "requested_by": "alice",
        "files": [{"path": "config/prod.yaml", "content": content}],
    }
    return bot.client.post("/api/v1/changes", json=body, headers=AUTH)


def test_a_deeply_nested_policy_file_is_refused_with_its_position(bot: Bot) -> None:
    """Nesting under the 64 KiB limit but past the depth limit: 422 policy_invalid naming
    file:line:col (before, a RecursionError answered 500)."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: " + "[" * 600 + "]" * 600})
    answer = submit(bot)
    body = answer.get_json()
    assert (answer.status_code, body["error"]) == (422, "policy_invalid")
    assert body["problems"] == [".gitops/bot.yml:1:39: nested deeper than 32 levels"]


def test_schemas_are_read_at_the_commit_the_policy_was_recorded_at(bot: Bot) -> None:
    """A change starts under a schema allowing 10 replicas; the schema is then loosened on the
    branch before the change is checked: the change is still held to the schema of its policy's
    commit (and a change that starts after the edit to the new one)."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": RULES, "schemas/app.json": schema(10)})
    answer = submit(bot)
    assert answer.status_code == 202, answer.get_json()
    in_flight = answer.get_json()["operation_id"]
    recorded = operation(bot.services.engine, in_flight)["policy_sha"]
    bot.gitlab.push(PROJECT, "main", {"schemas/app.json": schema(100)})
    assert bot.gitlab.branch_head(PROJECT, "main") != recorded
    bot.settle()
    op = operation(bot.services.engine, in_flight)
    assert (bot.state(in_flight), op["step"]) == (S.CREATE_FAILED, Step.CREATE_CHECKS_FAILED)
    assert (
        "config/prod.yaml:1:11: schema schemas/app.json: 30 is greater than the maximum of 10"
        in (op["error_detail"])
    )
    assert bot.approvals.submitted == []
    later = submit(bot)
    assert later.status_code == 202, later.get_json()
    bot.settle()
    assert bot.state(later.get_json()["operation_id"]) is S.APPROVAL_SENT
