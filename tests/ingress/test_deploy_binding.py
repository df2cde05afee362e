"""Deploy callbacks bound to the change they name: a callback whose operation_id names one
change but whose project, MR or merge SHA is another's is recorded as a mismatch and moves
nothing, now or through reconciliation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from sqlalchemy import select

from bot.app.reconcile import run_reconcile
from bot.core.states import BindingState as S
from bot.services import Services
from bot.store.models import AUDIT, DEPLOY_SIGNALS, utcnow
from bot.store.operations import touch
from jobs import context
from tests.builders import binding_state, make_operation, operation
from tests.ingress.conftest import DEPLOY_SECRET
from tests.ingress.test_guard import run_queued

MERGE_SHA = "f" * 40  # what tests/builders.py merges every change as


@pytest.fixture(autouse=True)
def jobs_use(services: Services) -> Iterator[None]:
    """Jobs run on the test's services."""
    context.install(services)
    yield
    context.uninstall()


def merged(services: Services, project: str, project_id: int) -> str:
    """A MERGED change (MR !7, merge commit MERGE_SHA) in this project."""
    op_id = make_operation(services.engine, S.MERGED, project=project)
    touch(services.engine, op_id, project_id=project_id)
    return op_id


def deploy(client: FlaskClient, token: str = DEPLOY_SECRET, **fields: Any) -> int:
    """Posts a deploy callback with the token form; the HTTP status."""
    body = json.dumps({"mr_iid": 7, "status": "success", **fields}).encode()
    return client.post("/webhooks/deploy", data=body, headers={"X-Deploy-Token": token}).status_code


def mismatches(source: str) -> float:
    """gitops_callback_mismatch_total for a source."""
    return REGISTRY.get_sample_value("gitops_callback_mismatch_total", {"source": source}) or 0.0


def audit_details(services: Services, op_id: str) -> list[str]:
    """The details of the operation's audit rows that changed nothing (version 0)."""
    with services.engine.connect() as conn:
        query = select(AUDIT.c.detail).where(AUDIT.c.operation_id == op_id, AUDIT.c.version == 0)
        return [str(d) for d in conn.execute(query).scalars()]


def signal_statuses(services: Services) -> list[str]:
    """The status of every deploy signal kept, in order."""
    with services.engine.connect() as conn:
        query = select(DEPLOY_SIGNALS.c.status).order_by(DEPLOY_SIGNALS.c.id)
        return [str(s) for s in conn.execute(query).scalars()]


def reconcile(services: Services) -> Any:
    """A reconciliation run late enough to see every change merged in the test."""
    return run_reconcile(
        services.engine, utcnow() + timedelta(seconds=300), min_age=120, max_age=86400
    )


@pytest.mark.parametrize(
    ("wrong", "reason"),
    [
        ({"project_id": 15}, "the callback names project 15, operation"),
        ({"project_id": "other/app"}, "the callback names project other/app"),
        ({"project_id": 14, "mr_iid": 8}, "the callback names MR !8"),
        ({"project_id": 14, "mr_iid": 8, "sha": "e" * 40}, "and commit eeeeeeeeeeee"),
    ],
)
def test_callback_naming_one_change_and_anothers_project_or_mr_changes_nothing(
    client: FlaskClient, services: Services, wrong: dict[str, Any], reason: str
) -> None:
    """operation_id of change A with change B's project, or another MR of A's project: A and B
    stay MERGED, an audit row says "mismatch: ...", it is counted, and reconciliation later
    validates neither from it."""
    a = merged(services, "platform/config", 14)
    b = merged(services, "other/app", 15)
    before = mismatches("deploy")
    assert deploy(client, operation_id=a, **wrong) == 202
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, a) is S.MERGED
    assert binding_state(services.engine, b) is S.MERGED
    [detail] = audit_details(services, a)
    assert detail.startswith("mismatch: ")
    assert reason in detail
    assert mismatches("deploy") == before + 1
    assert signal_statuses(services) == ["mismatch"]
    report = reconcile(services)
    assert report.validated == []
    assert sorted(report.unmatched) == sorted([a, b])


@pytest.mark.parametrize(
    "right",
    [
        {"project_id": "platform/config"},
        {"project_id": "Platform/CONFIG"},
        {"project_id": 14},
        {"project_id": "14"},
        {"project_id": 14, "mr_iid": 99, "sha": MERGE_SHA},
    ],
)
def test_callback_matching_its_change_validates_it_after_a_mismatch_did_not(
    client: FlaskClient, services: Services, right: dict[str, Any]
) -> None:
    """A callback naming the change's project (path in any case, or numeric id) and MR, or its
    merge SHA, validates it; a mismatched one for the same operation before it did not."""
    a = merged(services, "platform/config", 14)
    assert deploy(client, operation_id=a, project_id=14, mr_iid=8) == 202
    assert deploy(client, operation_id=a, **right) == 202
    assert run_queued(services) == ["stale", "processed"]
    assert binding_state(services.engine, a) is S.VALIDATED


def test_failed_deploy_naming_another_mr_does_not_mark_the_change_failed(
    client: FlaskClient, services: Services
) -> None:
    """A "failed" callback naming change A with another MR leaves A exactly as it was."""
    a = merged(services, "platform/config", 14)
    version = operation(services.engine, a)["version"]
    assert deploy(client, operation_id=a, project_id=14, mr_iid=8, status="failed") == 202
    assert run_queued(services) == ["stale"]
    after = operation(services.engine, a)
    assert (after["version"], binding_state(services.engine, a)) == (version, S.MERGED)
    assert audit_details(services, a)[0].startswith("mismatch: ")
