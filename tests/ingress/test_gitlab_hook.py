"""POST /webhooks/gitlab: fast 2xx, stored once, quarantined or ignored with a reason, 401 only
for a bad secret."""

from __future__ import annotations

import io
import logging

import fakeredis
import pytest
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from sqlalchemy import select

from bot.ingress import inbox
from bot.services import Services
from bot.store.engine import make_engine
from bot.store.models import INBOX
from tests.builders import count
from tests.ingress.conftest import EVENTS, SECRET, fixture_body, gitlab_headers


def deliveries(source: str, outcome: str) -> float:
    """The delivery counter for (source, outcome)."""
    value = REGISTRY.get_sample_value(
        "gitops_webhook_deliveries_total", {"source": source, "outcome": outcome}
    )
    return value or 0.0


def rows(services: Services) -> list[dict[str, object]]:
    """Every inbox row."""
    with services.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(INBOX).order_by(INBOX.c.id))]


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_documented_payloads_are_stored_and_enqueued(
    client: FlaskClient, services: Services, name: str
) -> None:
    """Each documented MR, pipeline, note and deployment payload is accepted and queued once."""
    response = client.post(
        "/webhooks/gitlab",
        data=fixture_body(name),
        headers=gitlab_headers(EVENTS[name], key=f"k-{name}"),
    )
    assert response.status_code == 202
    [row] = rows(services)
    assert (row["status"], row["delivery_key"]) == ("received", f"gitlab:k-{name}")
    assert services.queue.enqueued == [("jobs.inbox.process", (row["id"],), None)]


@pytest.mark.parametrize("token", [None, "", "wrong", SECRET[:-1] + "X", SECRET + " "])
def test_a_bad_secret_is_401_and_stores_nothing(
    client: FlaskClient, services: Services, token: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing, wrong or one-character-off token is refused and nothing is kept."""
    caplog.set_level(logging.DEBUG)
    before = deliveries("gitlab", "unauthorized")
    response = client.post(
        "/webhooks/gitlab",
        data=fixture_body("merge_request.json"),
        headers=gitlab_headers("Merge Request Hook", token=token),
    )
    assert response.status_code == 401
    assert rows(services) == []
    assert services.queue.enqueued == []
    assert deliveries("gitlab", "unauthorized") == before + 1
    assert SECRET not in response.get_data(as_text=True)
    assert SECRET not in caplog.text


def test_an_unset_secret_refuses_everything(client: FlaskClient, services: Services) -> None:
    """With no webhook secret configured the bot fails closed."""
    services.settings = services.settings.__class__(webhook_secret="")
    response = client.post(
        "/webhooks/gitlab",
        data=fixture_body("merge_request.json"),
        headers=gitlab_headers("Merge Request Hook", token=""),
    )
    assert response.status_code == 401


@pytest.mark.parametrize("copies", [2, 5, 10])
def test_the_same_delivery_many_times_is_stored_once(
    client: FlaskClient, services: Services, copies: int
) -> None:
    """Re-sends keep their Idempotency-Key: every copy gets 2xx, one row, one job."""
    statuses = [
        client.post(
            "/webhooks/gitlab",
            data=fixture_body("pipeline.json"),
            headers=gitlab_headers("Pipeline Hook", key="same"),
        ).status_code
        for _ in range(copies)
    ]
    assert statuses == [202] + [200] * (copies - 1)
    assert len(rows(services)) == 1
    assert len(services.queue.enqueued) == 1


def test_without_idempotency_key_the_body_is_the_key(
    client: FlaskClient, services: Services
) -> None:
    """Old GitLab sends no Idempotency-Key: identical bodies dedupe, different ones do not."""
    for body in (
        fixture_body("pipeline.json"),
        fixture_body("pipeline.json"),
        fixture_body("pipeline.json", object_kind="pipeline", builds=[]),
    ):
        client.post(
            "/webhooks/gitlab", data=body, headers=gitlab_headers("Pipeline Hook", key=None)
        )
    assert len(rows(services)) == 2


@pytest.mark.parametrize("event", ["Push Hook", "Emoji Hook", "Job Hook", "", "Merge Request"])
def test_other_event_types_are_ignored_and_counted(
    client: FlaskClient, services: Services, event: str
) -> None:
    """Events the bot does not act on get 2xx (so GitLab keeps the hook) and are not stored."""
    before = deliveries("gitlab", "ignored")
    response = client.post(
        "/webhooks/gitlab", data=fixture_body("push.json"), headers=gitlab_headers(event)
    )
    assert response.status_code == 200
    assert rows(services) == []
    assert deliveries("gitlab", "ignored") == before + 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"object_kind": "push"}', "object_kind 'push' does not match"),
        (
            b'{"object_kind": "pipeline", "object_attributes": {}, "project": {"id": 1}}',
            "object_attributes.id",
        ),
        (b"[" * 5000 + b"]" * 5000, "nested deeper"),
        (b'{"a": NaN}', "NaN is not allowed"),
        (b'{"a": ' + b"9" * 5000 + b"}", "not JSON"),
    ],
)
def test_authenticated_garbage_is_quarantined_with_a_reason(
    client: FlaskClient, services: Services, body: bytes, reason: str
) -> None:
    """A body that cannot be used is acknowledged, kept with the reason, and not processed."""
    before = deliveries("gitlab", "quarantined")
    response = client.post("/webhooks/gitlab", data=body, headers=gitlab_headers("Pipeline Hook"))
    assert response.status_code == 200
    [row] = rows(services)
    assert row["status"] == "quarantined"
    assert reason in str(row["reason"])
    assert services.queue.enqueued == []
    assert deliveries("gitlab", "quarantined") == before + 1


def test_an_oversized_body_is_2xx_and_quarantined_unread(
    client: FlaskClient, services: Services
) -> None:
    """An authenticated body over GITOPS_WEBHOOK_MAX_BODY_BYTES (declared in Content-Length)
    is answered 2xx before it is read -- GitLab disables a hook after four 4xx -- and kept as a
    quarantined delivery, without its body, saying why."""
    big = b"{" + b" " * (70 * 1024) + b"}"
    response = client.post("/webhooks/gitlab", data=big, headers=gitlab_headers("Pipeline Hook"))
    assert response.status_code == 200
    assert response.get_json() == {"status": "quarantined"}
    (row,) = rows(services)
    assert row["status"] == "quarantined"
    assert row["body"] == b""
    assert row["reason"] == (
        f"body of {len(big)} bytes over GITOPS_WEBHOOK_MAX_BODY_BYTES ({64 * 1024}): "
        "not read, nothing processed"
    )


def test_an_oversized_chunked_body_is_cut_off_and_quarantined(
    client: FlaskClient, services: Services
) -> None:
    """A body with no Content-Length is cut off one byte past the limit, not read whole, and
    the delivery quarantined (2xx)."""
    stream = io.BytesIO(b"{" + b" " * (200 * 1024) + b"}")
    response = client.post(
        "/webhooks/gitlab",
        input_stream=stream,
        headers={**gitlab_headers("Pipeline Hook"), "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 200
    assert stream.tell() <= 70 * 1024
    assert [row["status"] for row in rows(services)] == ["quarantined"]


def test_an_oversized_body_with_a_wrong_token_is_still_401(
    client: FlaskClient, services: Services
) -> None:
    """Without the secret nothing is taken in, whatever its size."""
    big = b"{" + b" " * (70 * 1024) + b"}"
    headers = {**gitlab_headers("Pipeline Hook"), "X-Gitlab-Token": "wrong"}
    assert client.post("/webhooks/gitlab", data=big, headers=headers).status_code == 401
    assert rows(services) == []


def test_redis_down_still_stores_and_answers(client: FlaskClient, services: Services) -> None:
    """When the queue is down the delivery is kept for the sweep and GitLab still gets 2xx."""
    services.queue.down = True
    response = client.post(
        "/webhooks/gitlab",
        data=fixture_body("pipeline.json"),
        headers=gitlab_headers("Pipeline Hook"),
    )
    assert response.status_code == 202
    assert [r["status"] for r in rows(services)] == ["received"]
    assert services.queue.enqueued == []


def test_database_down_keeps_the_delivery_in_redis_until_it_is_back(
    client: FlaskClient, services: Services, tmp_path: object
) -> None:
    """A database outage costs GitLab no failed delivery: Redis holds it, then the inbox."""
    healthy = services.engine
    services.engine = make_engine("sqlite:////nonexistent-dir/down.sqlite3")
    for _ in range(2):
        response = client.post(
            "/webhooks/gitlab",
            data=fixture_body("pipeline.json"),
            headers=gitlab_headers("Pipeline Hook", key="during-outage"),
        )
        assert response.status_code == 202
    assert services.redis.llen(inbox.FALLBACK_KEY) == 2
    services.engine = healthy
    new_ids = inbox.drain_fallback(healthy, services.redis)
    assert len(new_ids) == 1  # the two copies dedupe on their key
    assert services.redis.llen(inbox.FALLBACK_KEY) == 0
    assert count(healthy, INBOX) == 1


def test_both_down_is_503(client: FlaskClient, services: Services) -> None:
    """Only when the database and Redis are both down does GitLab see a failure."""
    services.engine = make_engine("sqlite:////nonexistent-dir/down.sqlite3")
    server = fakeredis.FakeServer()
    server.connected = False
    services.redis = fakeredis.FakeRedis(server=server)
    before = deliveries("gitlab", "unavailable")
    response = client.post(
        "/webhooks/gitlab",
        data=fixture_body("pipeline.json"),
        headers=gitlab_headers("Pipeline Hook"),
    )
    assert response.status_code == 503
    assert deliveries("gitlab", "unavailable") == before + 1


def test_secret_headers_are_not_stored(client: FlaskClient, services: Services) -> None:
    """The stored delivery keeps GitLab's event headers but never the token."""
    client.post(
        "/webhooks/gitlab",
        data=fixture_body("pipeline.json"),
        headers=gitlab_headers("Pipeline Hook"),
    )
    [row] = rows(services)
    assert row["headers"]["X-Gitlab-Event"] == "Pipeline Hook"
    assert "X-Gitlab-Token" not in row["headers"]
    assert SECRET.encode() not in bytes(row["body"])
