"""API identities on the Procfile's processes: a team's `submit` client is refused cancelling
(403 insufficient_scope) or reading another team's change (403 project_not_allowed); an ordinary
client claiming another `requested_by` is refused (422); the audit trail of an admin's cancel
names the client; a revoked token is 401 at once on every web instance."""

from __future__ import annotations

import time

import pytest
import requests

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.clients import Scope, create_client, revoke_client
from tests.e2e.figures import record
from tests.e2e.world import PROJECT, World

pytestmark = pytest.mark.e2e

OTHER = "platform/apps"


def call(
    world: World, token: str, method: str, path: str, web: int = 0, **kw: object
) -> requests.Response:
    """/api/v1 with a client's own token."""
    return requests.request(
        method,
        f"{world.web[web]}/api/v1{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
        **kw,  # type: ignore[arg-type]
    )


def test_clients_are_held_to_their_scopes_projects_and_identity(world: World) -> None:
    """Two teams' clients and an admin one, against two web instances."""
    started = time.monotonic()
    world.add_project(OTHER, {"apps/web.yaml": "replicas: 1\n"})
    _, config_team = create_client(
        world.engine, "config-team", {Scope.SUBMIT, Scope.READ}, projects=[PROJECT]
    )
    _, apps_team = create_client(
        world.engine, "apps-team", {Scope.SUBMIT, Scope.READ}, projects=[OTHER]
    )
    _, admin = create_client(world.engine, "ops", {Scope.ADMIN})
    body = {
        "subject_id": "svc-a",
        "target_key": "config/a.yaml",
        "project": PROJECT,
        "target_branch": "main",
        "title": "Scale a",
        "files": [{"path": "config/a.yaml", "content": "replicas: 2\n"}],
    }
    from bot.store.flags import set_flag

    set_flag(world.engine, "workflow.order", Flow.APPROVE_FIRST.value)
    claimed = call(world, config_team, "POST", "/changes", json={**body, "requested_by": "alice"})
    assert (claimed.status_code, claimed.json()["field"]) == (422, "requested_by"), claimed.text
    answer = call(world, config_team, "POST", "/changes", json=body)
    assert answer.status_code == 202, answer.text
    op_id = answer.json()["operation_id"]
    world.wait_state(op_id, S.APPROVAL_SENT)
    assert world.op(op_id)["requested_by"] == "config-team"
    for web in (0, 1):
        cancel = call(world, config_team, "POST", f"/changes/{op_id}/cancel", web=web)
        assert (cancel.status_code, cancel.json()["error"]) == (403, "insufficient_scope")
        peek = call(world, apps_team, "GET", f"/changes/{op_id}", web=web)
        assert (peek.status_code, peek.json()["error"]) == (403, "project_not_allowed")
    assert world.state(op_id) is S.APPROVAL_SENT
    cancelled = call(world, admin, "POST", f"/changes/{op_id}/cancel", web=1)
    assert cancelled.status_code == 200, cancelled.text
    world.wait_state(op_id, S.CLOSED)
    assert "ops" in [row["actor"] for row in world.audit(op_id)]
    revoke_client(world.engine, "config-team")
    for web in (0, 1):
        assert call(world, config_team, "GET", "/changes", web=web).status_code == 401
    record("API clients: scopes, projects, identity, revocation", time.monotonic() - started)
