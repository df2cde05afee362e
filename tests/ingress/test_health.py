"""Health, readiness and metrics as an operator's probes see them."""

from __future__ import annotations

import re

import fakeredis
from flask.testing import FlaskClient

from bot.config import Settings
from bot.services import Services
from bot.store.engine import make_engine
from tests.ingress.conftest import fixture_body, gitlab_headers


def test_ready_when_database_and_embedded_queue_answer(client: FlaskClient) -> None:
    """On the embedded default the queue is in-process: ready means the database answers."""
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ready", "database": "ok", "queue": "embedded"}


def test_not_ready_when_redis_is_down(client: FlaskClient, services: Services) -> None:
    """With a Redis server configured and down, readiness says so with 503."""
    server = fakeredis.FakeServer()
    server.connected = False
    services.settings = Settings(redis_url="redis://down:6379/0")
    services.redis = fakeredis.FakeRedis(server=server)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["queue"] == "ConnectionError"


def test_not_ready_when_the_database_is_down(client: FlaskClient, services: Services) -> None:
    """A database that cannot be reached makes the instance not ready."""
    services.engine = make_engine("sqlite:////nonexistent-dir/down.sqlite3")
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["database"] == "OperationalError"


def test_metrics_show_deliveries_backlog_and_latency(client: FlaskClient) -> None:
    """After one stored delivery the scrape shows it accepted, in the backlog, and timed."""
    client.post(
        "/webhooks/gitlab",
        data=fixture_body("pipeline.json"),
        headers=gitlab_headers("Pipeline Hook", key="metrics-1"),
    )
    text = client.get("/metrics").get_data(as_text=True)
    assert re.search(
        r'^gitops_webhook_deliveries_total\{outcome="accepted",source="gitlab"\} '
        r"[1-9]",
        text,
        re.MULTILINE,
    )
    assert re.search(r"^gitops_inbox_backlog 1\.0$", text, re.MULTILINE)
    assert re.search(
        r'^gitops_webhook_ack_seconds_count\{source="gitlab"\} [1-9]', text, re.MULTILINE
    )
