"""Named API clients attacked: scopes, projects, requested_by, revoked tokens, the audit trail,
and the shared GITOPS_API_TOKEN kept working as one admin client."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.store.clients import Scope, create_client, revoke_client
from bot.store.models import AUDIT, OPERATIONS, OUTBOX
from bot.store.queue import line
from tests.api import Api, change_body
from tests.builders import binding_state, make_operation, merge_line

OTHER = "team-b/service"
ACTIONS = ["retry", "cancel", "promote"]


@pytest.fixture
def api(db: Engine) -> Api:
    """The app with the shared token "t" besides the named clients the tests create."""
    return Api.build(db)


def new_client(api: Api, name: str, *scopes: Scope, **kw: Any) -> str:
    """A named client's token."""
    return create_client(api.engine, name, set(scopes), **kw)[1]


def trail(engine: Engine) -> tuple[int, int, int]:
    """What an action leaves behind: audit rows, outbox rows, operations."""
    with engine.connect() as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in (AUDIT, OUTBOX, OPERATIONS)
        )


def operation(engine: Engine, operation_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(OPERATIONS).where(OPERATIONS.c.id == operation_id)).one()


def audit_actors(engine: Engine, operation_id: str) -> list[tuple[str, str, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(AUDIT.c.event, AUDIT.c.source, AUDIT.c.actor)
            .where(AUDIT.c.operation_id == operation_id)
            .order_by(AUDIT.c.id)
        ).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


# -- scopes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
def test_a_submit_only_client_cannot_retry_cancel_or_promote(api: Api, action: str) -> None:
    """A client with only `submit` is answered 403 insufficient_scope naming the scope it lacks
    for retry, cancel and promote, and nothing changes."""
    token = new_client(api, "ci-submit", Scope.SUBMIT)
    op_id = merge_line(api.engine, 1)[0]
    before = trail(api.engine)

    response = api.call("POST", f"/api/v1/changes/{op_id}/{action}", token=token)

    assert response.status_code == 403
    assert response.json is not None
    needed = "admin" if action == "promote" else "operate"
    assert (response.json["error"], response.json["scope"]) == ("insufficient_scope", needed)
    assert needed in response.json["detail"]
    assert trail(api.engine) == before
    assert binding_state(api.engine, op_id) is S.MERGING
    assert api.queue.enqueued == []


def test_a_submit_only_client_cannot_read(api: Api) -> None:
    """Without `read`, the lists and a change are 403 insufficient_scope `read`."""
    token = new_client(api, "ci-submit", Scope.SUBMIT)
    op_id = make_operation(api.engine, S.MERGING)
    for path in ("/api/v1/changes", f"/api/v1/changes/{op_id}", "/api/v1/queues"):
        response = api.call("GET", path, token=token)
        assert response.status_code == 403, path
        assert response.json is not None
        assert response.json["scope"] == "read"


def test_operate_retries_and_cancels_but_does_not_promote(api: Api) -> None:
    """`operate` cancels a change (the audit row names the client) but promoting needs admin."""
    token = new_client(api, "oncall", Scope.OPERATE, Scope.READ)
    first, second = merge_line(api.engine, 2)

    assert api.call("POST", f"/api/v1/changes/{second}/promote", token=token).status_code == 403
    response = api.call("POST", f"/api/v1/changes/{first}/cancel", token=token)

    assert response.status_code == 200
    assert audit_actors(api.engine, first)[-1] == ("cancel", "operator", "oncall")


def test_admin_holds_every_scope(api: Api) -> None:
    """An admin client reads, submits, cancels and promotes."""
    token = new_client(api, "platform-admin", Scope.ADMIN)
    first, second = merge_line(api.engine, 2)
    assert api.call("GET", "/api/v1/changes", token=token).status_code == 200
    assert api.submit(change_body(requested_by=None), token=token).status_code == 202
    assert api.call("POST", f"/api/v1/changes/{second}/promote", token=token).status_code == 200
    assert api.call("POST", f"/api/v1/changes/{first}/cancel", token=token).status_code == 200
    assert audit_actors(api.engine, second)[-1] == ("promote", "operator", "platform-admin")


# -- projects --------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
def test_a_client_limited_to_a_project_cannot_act_on_another_teams_change(
    api: Api, action: str
) -> None:
    """Client A, limited to platform/config, gets 403 project_not_allowed for retry, cancel and
    promote of a change in team-b/service: nothing changed, the audit log unchanged."""
    token = new_client(api, "team-a", Scope.ADMIN, projects=["platform/config"])
    theirs = merge_line(api.engine, 1, project=OTHER)[0]
    before = trail(api.engine)

    response = api.call("POST", f"/api/v1/changes/{theirs}/{action}", token=token)

    assert response.status_code == 403
    assert response.json is not None
    assert response.json["error"] == "project_not_allowed"
    assert OTHER not in response.json["detail"]  # not told whose it is
    assert trail(api.engine) == before
    assert binding_state(api.engine, theirs) is S.MERGING
    assert api.queue.enqueued == []


def test_a_client_limited_to_a_project_cannot_read_another_teams_change(api: Api) -> None:
    """GET of another project's change is 403; its own project's (any case) is 200."""
    token = new_client(api, "team-a", Scope.READ, projects=["Platform/Config"])
    theirs = make_operation(api.engine, S.MERGING, project=OTHER)
    ours = make_operation(api.engine, S.MERGING)
    refused = api.call("GET", f"/api/v1/changes/{theirs}", token=token)
    assert refused.status_code == 403
    assert refused.json is not None
    assert refused.json["error"] == "project_not_allowed"
    assert api.call("GET", f"/api/v1/changes/{ours}", token=token).status_code == 200


def test_an_unknown_change_is_404_for_a_limited_client(api: Api) -> None:
    """A change nobody has is 404 not_found, as for every client."""
    token = new_client(api, "team-a", Scope.READ, projects=["platform/config"])
    response = api.call("GET", "/api/v1/changes/00000000-0000-0000-0000-000000000000", token=token)
    assert response.status_code == 404


def test_a_client_limited_to_a_project_cannot_submit_to_another(api: Api) -> None:
    """A submission to another project is 403 project_not_allowed naming it; nothing recorded."""
    token = new_client(api, "team-a", Scope.SUBMIT, projects=["platform/config"])
    before = trail(api.engine)
    response = api.submit(change_body(project=OTHER, requested_by=None), token=token)
    assert response.status_code == 403
    assert response.json is not None
    assert (response.json["error"], response.json["project"]) == ("project_not_allowed", OTHER)
    assert trail(api.engine) == before
    assert api.queue.enqueued == []


def test_lists_and_queues_show_a_limited_client_only_its_projects(api: Api) -> None:
    """GET /changes and GET /queues leave out the other teams' changes; a numeric project id
    works as GITOPS_PROJECTS' does."""
    ours = merge_line(api.engine, 1)[0]
    theirs = merge_line(api.engine, 1, project=OTHER, target_branch="main")[0]
    by_path = new_client(api, "team-a", Scope.READ, projects=["platform/config"])

    listed = api.call("GET", "/api/v1/changes", token=by_path).json
    queues = api.call("GET", "/api/v1/queues", token=by_path).json
    everything = api.call("GET", "/api/v1/changes").json

    assert listed is not None
    assert queues is not None
    assert everything is not None
    assert [c["operation_id"] for c in listed["changes"]] == [ours]
    assert [q["project"] for q in queues["queues"]] == ["platform/config"]
    assert {c["operation_id"] for c in everything["changes"]} == {ours, theirs}


def test_a_project_named_by_its_numeric_id(api: Api) -> None:
    """A client limited to project id 42 reads the change GitLab knows as project 42."""
    from sqlalchemy import update

    from bot.store.writeguard import state_writes

    op_id = make_operation(api.engine, S.MERGING, project=OTHER)
    with api.engine.begin() as conn, state_writes(conn):
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == op_id).values(project_id=42))
    token = new_client(api, "team-b", Scope.READ, projects=["42"])
    assert api.call("GET", f"/api/v1/changes/{op_id}", token=token).status_code == 200
    listed = api.call("GET", "/api/v1/changes", token=token).json
    assert listed is not None
    assert [c["operation_id"] for c in listed["changes"]] == [op_id]


# -- who requested it ------------------------------------------------------------------------------


def test_an_ordinary_client_cannot_claim_to_be_alice(api: Api) -> None:
    """`requested_by: "alice"` from a client not created with --on-behalf is refused 422 naming
    the field, and nothing is recorded as alice."""
    token = new_client(api, "ci-deployer", Scope.SUBMIT)
    before = trail(api.engine)
    response = api.submit(change_body(requested_by="alice"), token=token)
    assert response.status_code == 422
    assert response.json is not None
    assert (response.json["error"], response.json["field"]) == ("invalid", "requested_by")
    assert trail(api.engine) == before


def test_an_ordinary_clients_change_is_requested_by_the_client(api: Api) -> None:
    """Without requested_by (or with its own name) the applicant is the client; the operation
    and its audit row name it."""
    token = new_client(api, "ci-deployer", Scope.SUBMIT)
    first = api.submit(change_body(requested_by=None), token=token).json
    second = api.submit(change_body(requested_by="ci-deployer"), token=token).json
    assert first is not None
    assert second is not None
    for accepted in (first, second):
        op = operation(api.engine, accepted["operation_id"])
        assert (op.requested_by, op.api_client) == ("ci-deployer", "ci-deployer")
        assert audit_actors(api.engine, accepted["operation_id"]) == [
            ("submit", "api", "ci-deployer")
        ]


def test_an_on_behalf_client_states_the_user_and_is_named_too(api: Api) -> None:
    """A client created with --on-behalf may name alice: she is the applicant, the audit row
    reads "alice via portal", the operation records the client."""
    token = new_client(api, "portal", Scope.SUBMIT, on_behalf=True)
    accepted = api.submit(change_body(requested_by="alice"), token=token).json
    assert accepted is not None
    op = operation(api.engine, accepted["operation_id"])
    assert (op.requested_by, op.api_client) == ("alice", "portal")
    assert audit_actors(api.engine, accepted["operation_id"]) == [
        ("submit", "api", "alice via portal")
    ]


def test_the_audit_rows_of_a_submit_and_a_cancel_name_the_client(api: Api) -> None:
    """Every audit row an API action writes names the client, and the API's history shows it."""
    token = new_client(api, "ci-deployer", Scope.SUBMIT, Scope.OPERATE, Scope.READ)
    accepted = api.submit(change_body(requested_by=None), token=token).json
    assert accepted is not None
    op_id = accepted["operation_id"]
    cancelled = api.call("POST", f"/api/v1/changes/{op_id}/cancel", token=token).json
    assert cancelled is not None
    assert audit_actors(api.engine, op_id) == [
        ("submit", "api", "ci-deployer"),
        ("cancel", "operator", "ci-deployer"),
    ]
    assert [e["actor"] for e in cancelled["history"]] == ["ci-deployer", "ci-deployer"]


def test_an_idempotency_key_is_bound_to_its_client(api: Api) -> None:
    """Another client repeating a key with the same body does not get the first one's change."""
    first = new_client(api, "team-a", Scope.SUBMIT)
    second = new_client(api, "team-b", Scope.SUBMIT)
    body = change_body(requested_by=None)
    key = {"Idempotency-Key": "deploy-1"}
    assert api.submit(body, token=first, headers=key).status_code == 202
    again = api.submit(body, token=first, headers=key)
    stolen = api.submit(body, token=second, headers=key)
    assert again.status_code == 202
    assert stolen.status_code == 422
    assert stolen.json is not None
    assert stolen.json["error"] == "idempotency_key_reused"


# -- tokens ----------------------------------------------------------------------------------------


def test_a_revoked_token_is_401_at_once(api: Api) -> None:
    """Revoking a client ends its token on the next request, on every route."""
    token = new_client(api, "old-ci", Scope.ADMIN)
    assert api.call("GET", "/api/v1/changes", token=token).status_code == 200
    revoke_client(api.engine, "old-ci")
    for method, path in [("GET", "/api/v1/changes"), ("POST", "/api/v1/changes")]:
        response = api.call(method, path, token=token, json=change_body(requested_by=None))
        assert response.status_code == 401
        assert response.json is not None
        assert response.json["error"] == "unauthorized"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_token_like_a_clients_but_not_one_is_401(api: Api) -> None:
    """A well-formed `gbc_` token that no client has, or one character off, is refused."""
    token = new_client(api, "ci", Scope.READ)
    for wrong in ("gbc_" + "A" * 43, token[:-1] + ("B" if token[-1] != "B" else "C"), "gbc_"):
        assert api.call("GET", "/api/v1/changes", token=wrong).status_code == 401


def test_the_shared_token_still_works_as_an_admin_that_may_speak_for_users(api: Api) -> None:
    """GITOPS_API_TOKEN submits for alice, and promotes, as the client GITOPS_API_TOKEN."""
    accepted = api.submit(change_body(requested_by="alice")).json
    assert accepted is not None
    first, second = merge_line(api.engine, 2)
    assert api.call("POST", f"/api/v1/changes/{second}/promote").status_code == 200
    assert [e.operation_id for e in line(api.engine, "platform/config", "main")] == [
        second,
        first,
    ]
    op = operation(api.engine, accepted["operation_id"])
    assert (op.requested_by, op.api_client) == ("alice", "GITOPS_API_TOKEN")
