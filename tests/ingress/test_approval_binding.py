"""Approval callbacks bound to their change: the stored approval id, ext.mrId and
ext.change.digest must be the operation's, else the callback is a counted mismatch and
nothing moves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.services import Services
from bot.store.operations import set_identity_once
from jobs import context
from tests.builders import binding_state, make_operation, operation
from tests.ingress.test_deploy_binding import audit_details, mismatches
from tests.ingress.test_guard import run_queued, send_approval

#: the digest given to an operation that has no change identity yet
DIGEST = "a" * 64


@pytest.fixture(autouse=True)
def jobs_use(services: Services) -> Iterator[None]:
    """Jobs run on the test's services."""
    context.install(services)
    yield
    context.uninstall()


def waiting(services: Services, flow: Flow = Flow.APPROVE_FIRST) -> str:
    """An operation in APPROVAL_SENT whose submission was recorded as approval apr-1."""
    op_id = make_operation(services.engine, S.APPROVAL_SENT, flow=flow)
    assert operation(services.engine, op_id)["approval_id"] == "apr-1"
    return op_id


def test_a_callback_for_another_approval_id_moves_nothing(
    client: FlaskClient, services: Services
) -> None:
    """An approval of apr-2 for an operation whose request is apr-1 is a counted mismatch; the
    callback for apr-1 then approves it."""
    op_id = waiting(services)
    before = mismatches("approval")
    send_approval(client, op_id, "r1", approval_id="apr-2")
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, op_id) is S.APPROVAL_SENT
    [detail] = audit_details(services, op_id)
    assert detail.startswith("mismatch: approval id mismatch")
    assert mismatches("approval") == before + 1
    send_approval(client, op_id, "r2", approval_id="apr-1")
    assert run_queued(services) == ["processed"]
    assert binding_state(services.engine, op_id) is S.MR_CREATING


def test_a_callback_naming_another_mr_moves_nothing(
    client: FlaskClient, services: Services
) -> None:
    """An MR-first approval whose ext.mrId is !8 cannot approve the change of MR !7."""
    op_id = waiting(services, Flow.MR_FIRST)
    send_approval(client, op_id, "r1", ext={"mrId": 8, "project": "platform/config"})
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, op_id) is S.APPROVAL_SENT
    assert "MR mismatch" in audit_details(services, op_id)[0]
    send_approval(client, op_id, "r2", ext={"mrId": 7, "project": "platform/config"})
    assert run_queued(services) == ["processed"]
    assert binding_state(services.engine, op_id) is S.MERGING


@pytest.mark.parametrize(
    ("ext", "moves"),
    [
        ({"change": {"digest": "b" * 64}}, False),
        ({"change": {"digest": "sha256:" + "b" * 64}}, False),
        ({"change": {"digest": "own"}}, True),
        ({"change": {"digest": "sha256:OWN"}}, True),
        ({"change": {"project": "platform/config"}}, True),
        ({}, True),
    ],
)
def test_the_change_digest_must_be_the_one_requested(
    client: FlaskClient, services: Services, ext: dict[str, Any], moves: bool
) -> None:
    """An approval carrying another change's digest moves nothing; the operation's own digest,
    or none at all (an approval system that does not echo it), approves."""
    op_id = waiting(services)
    set_identity_once(services.engine, op_id, {"digest": DIGEST, "files": []})
    own = str(operation(services.engine, op_id)["change_identity"]["digest"])
    digest = ext.get("change", {}).get("digest")
    if digest in ("own", "sha256:OWN"):
        ext = {"change": {"digest": own if digest == "own" else "sha256:" + own.upper()}}
    send_approval(client, op_id, "r-bad", ext={"change": {"digest": "c" * 64}})
    send_approval(client, op_id, "r1", ext=ext)
    assert run_queued(services) == ["stale", "processed" if moves else "stale"]
    assert binding_state(services.engine, op_id) is (S.MR_CREATING if moves else S.APPROVAL_SENT)
    assert "change digest mismatch" in audit_details(services, op_id)[0]
