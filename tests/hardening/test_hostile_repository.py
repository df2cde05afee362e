"""A repository's content attacks the bot through the API and the embedded runner: a policy file
holding a value YAML cannot make answers 422 `policy_invalid` naming file:line:col (each was a
500), and a schema whose `$ref` names a local server stops the change before approval naming
the reference, the server never asked."""

from __future__ import annotations

import json

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Step
from tests.builders import operation
from tests.hardening.recorder import recording
from tests.workflow.harness import PROJECT, Bot
from tests.workflow.test_policy_hardening import AUTH, submit

POLICY = ".gitops/bot.yml"
RULES = "validators:\n  - glob: 'config/**'\n    schema: schemas/app.json\n"


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        (
            "version: 1\ndeploy:\n  timeout: 2023-02-30\n",
            ".gitops/bot.yml:3:12: not a valid timestamp: day is out of range for month",
        ),
        (
            f"version: 1\ndeploy:\n  timeout: {'9' * 4301}\n",
            ".gitops/bot.yml:3:12: an integer of more than 4300 digits",
        ),
        (
            "version: 1\npoll:\n  pipeline_tiers: [[1" + ":59" * 400 + ".5, 1]]\n",
            ".gitops/bot.yml:3:21: a number too large to read (float)",
        ),
    ],
    ids=["invalid date", "4301 digits", "float overflow"],
)
def test_a_policy_value_yaml_cannot_make_is_a_422_naming_it(
    bot: Bot, policy: str, problem: str
) -> None:
    """An invalid date, an integer past Python's 4,300 digits, a sexagesimal float past a
    float's range: 422 policy_invalid naming file:line:col, nothing recorded (each was a 500:
    PyYAML's ValueError or OverflowError escaped the parser)."""
    bot.gitlab.push(PROJECT, "main", {POLICY: policy})
    answer = submit(bot)
    body = answer.get_json()
    assert (answer.status_code, body["error"]) == (422, "policy_invalid"), body
    assert body["problems"] == [problem]
    assert bot.client.get("/api/v1/changes", headers=AUTH).get_json()["changes"] == []


def test_a_schema_ref_to_a_local_server_stops_the_change_and_asks_nothing(bot: Bot) -> None:
    """The repository's schema `$ref`s a local server that never answers (before: urlopen with
    no timeout held the step): the change ends CREATE_FAILED (CHECKS_FAILED) naming the
    reference, nobody is asked to approve, and the server saw no connection."""
    with recording() as server:
        ref = f"{server.url}/replicas.json"
        schema = {"type": "object", "properties": {"replicas": {"$ref": ref}}}
        bot.gitlab.push(PROJECT, "main", {POLICY: RULES, "schemas/app.json": json.dumps(schema)})
        answer = submit(bot)
        assert answer.status_code == 202, answer.get_json()
        op_id = answer.get_json()["operation_id"]
        bot.settle()
        op = operation(bot.services.engine, op_id)
        assert (bot.state(op_id), op["step"]) == (S.CREATE_FAILED, Step.CREATE_CHECKS_FAILED)
        assert op["error_detail"] == (
            f"config/prod.yaml:1:1: schema schemas/app.json: $ref '{ref}' not followed: outside "
            f"this repository (references are never fetched): '{ref}'"
        )
        assert bot.approvals.submitted == []
        assert server.connections == 0
