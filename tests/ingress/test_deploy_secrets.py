"""Per-project deploy secrets (GITOPS_DEPLOY_SECRETS): a project with its own secret is reached
only with it, by token or signature; others keep the global GITOPS_DEPLOY_SECRET; a callback
that came in under another scope cannot move a change of a project with its own secret."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import fakeredis
import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.app.reconcile import run_reconcile
from bot.approval import sign
from bot.core.states import BindingState as S
from bot.services import Services
from bot.store.models import INBOX, utcnow
from bot.store.operations import touch
from jobs import context
from tests.api import FakeQueue
from tests.builders import binding_state, make_operation
from tests.ingress.conftest import DEPLOY_SECRET, settings
from tests.ingress.test_deploy_binding import audit_details, mismatches
from tests.ingress.test_guard import run_queued

CONFIG_SECRET = "config-own-s3cret"  # platform/config's own, configured under its path
NUMBERED_SECRET = "project-77-s3cret"  # project 77's own, configured under its numeric id
SECRETS = {"platform/config": CONFIG_SECRET, "77": NUMBERED_SECRET}


@pytest.fixture
def services(db: Engine) -> Services:
    """The ingress services with two projects that have their own deploy secret."""
    return Services(
        settings=settings(deploy_secrets=SECRETS),
        engine=db,
        queue=FakeQueue(),
        redis=fakeredis.FakeRedis(),
    )


@pytest.fixture(autouse=True)
def jobs_use(services: Services) -> Iterator[None]:
    """Jobs run on the test's services."""
    context.install(services)
    yield
    context.uninstall()


def body(project: object, mr_iid: int = 7, **more: Any) -> bytes:
    """A deploy callback body."""
    return json.dumps(
        {"project_id": project, "mr_iid": mr_iid, "status": "success", **more}
    ).encode()


def by_token(client: FlaskClient, data: bytes, secret: str, **headers: str) -> int:
    """Posts with X-Deploy-Token; the HTTP status."""
    sent = {"X-Deploy-Token": secret, **headers}
    return client.post("/webhooks/deploy", data=data, headers=sent).status_code


def by_signature(client: FlaskClient, data: bytes, secret: str, at: float | None = None) -> int:
    """Posts with X-Deploy-Timestamp and X-Deploy-Signature; the HTTP status."""
    stamp = str(int(time.time() if at is None else at))
    headers = {"X-Deploy-Timestamp": stamp, "X-Deploy-Signature": sign(secret, stamp, data)}
    return client.post("/webhooks/deploy", data=data, headers=headers).status_code


def stored(services: Services) -> int:
    """How many deliveries the inbox holds."""
    with services.engine.connect() as conn:
        return len(list(conn.execute(select(INBOX.c.id))))


def test_a_project_with_its_own_secret_takes_it_and_not_the_global_one(
    client: FlaskClient, services: Services
) -> None:
    """platform/config's own secret admits its callbacks (token and signed form, any case of
    the path); the global secret is 401 for it and stores nothing."""
    assert by_token(client, body("platform/config"), DEPLOY_SECRET) == 401
    assert by_signature(client, body("platform/config"), DEPLOY_SECRET) == 401
    assert stored(services) == 0
    assert by_token(client, body("platform/config"), CONFIG_SECRET) == 202
    assert by_signature(client, body("Platform/Config", 8), CONFIG_SECRET) == 202
    assert by_token(client, body(77), NUMBERED_SECRET) == 202
    assert stored(services) == 3


def test_signed_form_inside_the_window_only(client: FlaskClient, services: Services) -> None:
    """A signature with the project's secret is accepted now, refused 300+ s early or late."""
    assert by_signature(client, body(77, 1), NUMBERED_SECRET, at=time.time() - 301) == 401
    assert by_signature(client, body(77, 2), NUMBERED_SECRET, at=time.time() + 301) == 401
    assert stored(services) == 0
    assert by_signature(client, body(77, 3), NUMBERED_SECRET, at=time.time() - 250) == 202


def test_one_projects_secret_opens_no_other_project(
    client: FlaskClient, services: Services
) -> None:
    """Project 77's secret is 401 for platform/config and for a project without a secret."""
    assert by_token(client, body("platform/config"), NUMBERED_SECRET) == 401
    assert by_signature(client, body("other/app"), NUMBERED_SECRET) == 401
    assert by_token(client, body(77), CONFIG_SECRET) == 401
    assert stored(services) == 0
    assert by_token(client, body(77), NUMBERED_SECRET) == 202


def test_the_global_secret_still_serves_projects_without_their_own(
    client: FlaskClient, services: Services
) -> None:
    """Projects not in GITOPS_DEPLOY_SECRETS keep using the global secret, both forms; for the
    projects that are, it no longer works."""
    assert by_token(client, body("other/app"), DEPLOY_SECRET) == 202
    assert by_signature(client, body(15, 2), DEPLOY_SECRET) == 202
    assert by_token(client, body(77), DEPLOY_SECRET) == 401
    assert stored(services) == 2


@pytest.mark.parametrize("named", ["operation", "mr"])
def test_a_global_callback_naming_the_projects_number_cannot_move_its_change(
    client: FlaskClient, services: Services, named: str
) -> None:
    """The secret is configured under the path, the callback names the numeric id (14) and so
    passes the door with the global secret (a forged scope header does not help): at
    processing it is a mismatch, the change stays MERGED, and reconciliation ignores it."""
    op_id = make_operation(services.engine, S.MERGED, project="platform/config")
    touch(services.engine, op_id, project_id=14)
    extra = {"operation_id": op_id} if named == "operation" else {}
    forged = {"X-Gitops-Deploy-Scope": "project:platform/config"}
    before = mismatches("deploy")
    assert by_token(client, body(14, **extra), DEPLOY_SECRET, **forged) == 202
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, op_id) is S.MERGED
    [detail] = audit_details(services, op_id)
    assert "authenticated with the global deploy secret" in detail
    assert mismatches("deploy") == before + 1
    later = utcnow() + timedelta(seconds=300)
    assert run_reconcile(services.engine, later, min_age=120, max_age=86400).validated == []
    assert by_token(client, body("platform/config", **extra), CONFIG_SECRET) == 202
    assert run_queued(services) == ["processed"]
    assert binding_state(services.engine, op_id) is S.VALIDATED


def test_a_callback_in_its_own_projects_scope_naming_another_projects_change_is_a_mismatch(
    client: FlaskClient, services: Services
) -> None:
    """Project 77's secret with a body naming project 77 and the operation_id of a
    platform/config change: admitted at the door, a mismatch at processing."""
    op_id = make_operation(services.engine, S.MERGED, project="platform/config")
    touch(services.engine, op_id, project_id=14)
    assert by_token(client, body(77, operation_id=op_id), NUMBERED_SECRET) == 202
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, op_id) is S.MERGED
    assert audit_details(services, op_id)[0].startswith("mismatch: the callback names project 77")
