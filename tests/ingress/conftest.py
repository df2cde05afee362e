"""An app with real inbox storage, a recording queue and an in-process Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.services import Services
from tests.api import FakeQueue
from webhooks import create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SECRET = "gitlab-hook-s3cret"
APPROVAL_SECRET = "approval-s3cret"
DEPLOY_SECRET = "deploy-s3cret"


def settings(**kw: Any) -> Settings:
    """Settings for ingress tests (small body limit, known secrets)."""
    values: dict[str, Any] = {
        "webhook_secret": SECRET,
        "approval_secret": APPROVAL_SECRET,
        "deploy_secret": DEPLOY_SECRET,
        "api_token": "api-token",
        "max_body_bytes": 64 * 1024,
        "webhook_max_body_bytes": 64 * 1024,
    }
    values.update(kw)
    return Settings(**values)


@pytest.fixture
def services(db: Engine) -> Services:
    """Services over the suite's database, a recording queue and fakeredis."""
    return Services(settings=settings(), engine=db, queue=FakeQueue(), redis=fakeredis.FakeRedis())


@pytest.fixture
def app(services: Services) -> Flask:
    """The web app as production builds it, on these services."""
    return create_app(services=services)


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    """A test client for the app."""
    with app.test_client() as test_client:
        yield test_client


def fixture_body(name: str, **overrides: Any) -> bytes:
    """A documented GitLab payload (tests/fixtures), with top-level keys overridden."""
    data = json.loads((FIXTURES / name).read_text())
    data.update(overrides)
    return json.dumps(data).encode()


EVENTS = {
    "merge_request.json": "Merge Request Hook",
    "pipeline.json": "Pipeline Hook",
    "note_merge_request.json": "Note Hook",
    "deployment.json": "Deployment Hook",
}


def gitlab_headers(
    event: str, key: str | None = "key-1", token: str | None = SECRET
) -> dict[str, str]:
    """GitLab's delivery headers."""
    headers = {"X-Gitlab-Event": event, "Content-Type": "application/json"}
    if token is not None:
        headers["X-Gitlab-Token"] = token
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers
