"""Repository content as an attacker writes it, on the Procfile's processes: a schema whose `$ref`
names a local server stops the change before approval naming the reference (the worker never
connects: before, urlopen with no timeout held the job), and a policy file holding an invalid
date answers 422 `policy_invalid` naming file:line:col (before, a 500)."""

from __future__ import annotations

import json
import time

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Step
from tests.e2e.figures import record
from tests.e2e.world import PROJECT, World
from tests.hardening.recorder import recording

pytestmark = pytest.mark.e2e

POLICY = ".gitops/bot.yml"
RULES = "version: 1\nvalidators:\n  - glob: 'config/**'\n    schema: schemas/app.json\n"


def test_a_schema_ref_to_a_local_server_is_refused_and_never_fetched(world: World) -> None:
    """`$ref: http://127.0.0.1:<port>/replicas.json` in the repository's schema: the change ends
    CREATE_FAILED (CHECKS_FAILED) naming the reference, with no approval asked and no
    connection to the server; the next change, once the schema is fixed, is checked as usual."""
    started = time.monotonic()
    with recording() as server:
        ref = f"{server.url}/replicas.json"
        schema = {"type": "object", "properties": {"replicas": {"$ref": ref}}}
        world.gitlab.push(PROJECT, "main", {POLICY: RULES, "schemas/app.json": json.dumps(schema)})
        op_id = world.submit(subject="prod", path="config/prod.yaml")
        world.wait_state(op_id, S.CREATE_FAILED, fail_on_failed=False)
        op = world.op(op_id)
        assert op["step"] == Step.CREATE_CHECKS_FAILED.value, world.describe(op_id)
        assert op["error_detail"] == (
            f"config/prod.yaml:1:1: schema schemas/app.json: $ref '{ref}' not followed: outside "
            f"this repository (references are never fetched): '{ref}'"
        )
        assert server.connections == 0
    fixed = {"type": "object", "properties": {"replicas": {"type": "integer"}}}
    world.gitlab.push(PROJECT, "main", {"schemas/app.json": json.dumps(fixed)})
    later = world.submit(subject="prod", path="config/prod.yaml")
    world.wait_state(later, S.VALIDATED)
    record("hostile schema $ref refused, nothing fetched", time.monotonic() - started)


def test_a_policy_file_with_an_invalid_date_is_a_422(world: World) -> None:
    """`deploy.timeout: 2023-02-30` (PyYAML's ValueError answered 500 before): 422
    policy_invalid naming the file, line and column; nothing recorded."""
    world.gitlab.push(PROJECT, "main", {POLICY: "version: 1\ndeploy:\n  timeout: 2023-02-30\n"})
    answer = world.submit_answer(subject="prod", path="config/prod.yaml")
    body = answer.json()
    assert (answer.status_code, body["error"]) == (422, "policy_invalid"), body
    assert body["problems"] == [
        f"{POLICY}:3:12: not a valid timestamp: day is out of range for month"
    ]
    assert world.api("GET", "/changes").json()["changes"] == []
