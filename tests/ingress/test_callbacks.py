"""POST /webhooks/approval and /webhooks/deploy: authenticated, stored once, quarantined when
unusable."""

from __future__ import annotations

import json
import time

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from bot.approval import sign
from bot.services import Services
from bot.store.models import INBOX
from tests.ingress.conftest import APPROVAL_SECRET, DEPLOY_SECRET


def approval_callback(request_id: str = "req-1", **kw: object) -> bytes:
    """An approval callback body as the approval system sends it."""
    body = {
        "request_id": request_id,
        "operation_id": "op-1",
        "approval_id": "apr-1",
        "decision": "approved",
        "ext": {},
    }
    body.update(kw)
    return json.dumps(body).encode()


def signed(body: bytes, secret: str = APPROVAL_SECRET, at: float | None = None) -> dict[str, str]:
    """The approval system's signature headers for this body."""
    timestamp = str(int(time.time() if at is None else at))
    return {
        "X-Approval-Timestamp": timestamp,
        "X-Approval-Signature": sign(secret, timestamp, body),
        "Content-Type": "application/json",
    }


def stored(services: Services) -> list[tuple[str, str]]:
    """(delivery_key, status) of every inbox row."""
    with services.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(select(INBOX.c.delivery_key, INBOX.c.status).order_by(INBOX.c.id))
        ]


def test_signed_callback_is_stored_once_per_request_id(
    client: FlaskClient, services: Services
) -> None:
    """Three copies of the same callback make one inbox row keyed on request_id and one job."""
    body = approval_callback()
    codes = [
        client.post("/webhooks/approval", data=body, headers=signed(body)).status_code
        for _ in range(3)
    ]
    assert codes == [202, 200, 200]
    assert stored(services) == [("approval:req-1", "received")]
    assert len(services.queue.enqueued) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Approval-Timestamp": "1"},
        "tampered",
        "wrong-secret",
        "stale",
        "future",
    ],
)
def test_unauthentic_callbacks_are_401(
    client: FlaskClient, services: Services, headers: object
) -> None:
    """Missing, tampered, wrongly keyed or out-of-window signatures are refused, nothing kept."""
    body = approval_callback()
    sent = body
    if headers == "tampered":
        headers, sent = signed(body), body.replace(b"approved", b"rejected")
    elif headers == "wrong-secret":
        headers = signed(body, secret="not-it")
    elif headers == "stale":
        headers = signed(body, at=time.time() - 301)
    elif headers == "future":
        headers = signed(body, at=time.time() + 301)
    response = client.post("/webhooks/approval", data=sent, headers=headers)
    assert response.status_code == 401
    assert stored(services) == []


def test_signed_but_malformed_callback_is_quarantined(
    client: FlaskClient, services: Services
) -> None:
    """An authentic callback with an unknown decision is acknowledged and quarantined."""
    body = approval_callback(decision="maybe")
    response = client.post("/webhooks/approval", data=body, headers=signed(body))
    assert response.status_code == 200
    [(_, status)] = stored(services)
    assert status == "quarantined"
    assert services.queue.enqueued == []


def deploy_body(**kw: object) -> bytes:
    """A deploy callback body."""
    body: dict[str, object] = {"project_id": 14, "mr_iid": 7, "status": "success"}
    body.update(kw)
    return json.dumps(body).encode()


def test_deploy_callback_with_token_is_stored(client: FlaskClient, services: Services) -> None:
    """The deploy token admits the callback; a repeat of the same body is a duplicate."""
    body = deploy_body(operation_id="op-1", sha="a" * 40)
    headers = {"X-Deploy-Token": DEPLOY_SECRET, "Content-Type": "application/json"}
    assert client.post("/webhooks/deploy", data=body, headers=headers).status_code == 202
    assert client.post("/webhooks/deploy", data=body, headers=headers).status_code == 200
    assert [status for _, status in stored(services)] == ["received"]


def test_deploy_callback_with_signature_is_stored(client: FlaskClient, services: Services) -> None:
    """A signature made like the approval system's, keyed with the deploy secret, is accepted."""
    body = deploy_body()
    timestamp = str(int(time.time()))
    headers = {
        "X-Deploy-Timestamp": timestamp,
        "X-Deploy-Signature": sign(DEPLOY_SECRET, timestamp, body),
    }
    assert client.post("/webhooks/deploy", data=body, headers=headers).status_code == 202


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Deploy-Token": "nope"},
        {"X-Deploy-Timestamp": "1", "X-Deploy-Signature": "sha256=00"},
    ],
)
def test_deploy_callback_unauthentic_is_401(
    client: FlaskClient, services: Services, headers: dict[str, str]
) -> None:
    """No token, a wrong token or a bad signature is refused and nothing is kept."""
    assert client.post("/webhooks/deploy", data=deploy_body(), headers=headers).status_code == 401
    assert stored(services) == []


@pytest.mark.parametrize(
    "body",
    [
        deploy_body(status="maybe"),
        deploy_body(mr_iid=-1),
        deploy_body(mr_iid="7"),
        deploy_body(sha="not-a-sha"),
        b"[]",
        b"nope",
    ],
)
def test_deploy_callback_malformed_is_quarantined(
    client: FlaskClient, services: Services, body: bytes
) -> None:
    """An authentic deploy callback that cannot be used is acknowledged and quarantined."""
    response = client.post("/webhooks/deploy", data=body, headers={"X-Deploy-Token": DEPLOY_SECRET})
    assert response.status_code == 200
    assert [status for _, status in stored(services)] == ["quarantined"]
