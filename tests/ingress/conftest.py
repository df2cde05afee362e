"""An app with real inbox storage, a recording queue and an in-process Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.queueing import QueueUnavailable
from bot.services import Services
from webhooks import create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SECRET = "gitlab-hook-s3cret"
APPROVAL_SECRET = "approval-s3cret"
DEPLOY_SECRET = "deploy-s3cret"


@dataclass
class RecordingQueue:
    """A WorkQueue that records what was enqueued; it can be told to be down."""

    jobs: list[tuple[str, tuple[object, ...], str | None]] = field(default_factory=list)
    down: bool = False

    def enqueue(self, func: str, *args: object, job_id: str | None = None) -> None:
        if self.down:
            raise QueueUnavailable("redis is down")
        self.jobs.append((func, args, job_id))

    def enqueue_in(
        self, seconds: float, func: str, *args: object, job_id: str | None = None
    ) -> None:
        self.enqueue(func, *args, job_id=job_id)

    def length(self) -> int:
        if self.down:
            raise QueueUnavailable("redis is down")
        return len(self.jobs)


def settings(**kw: Any) -> Settings:
    """Settings for ingress tests (small body limit, known secrets)."""
    values: dict[str, Any] = {
        "webhook_secret": SECRET,
        "approval_secret": APPROVAL_SECRET,
        "deploy_secret": DEPLOY_SECRET,
        "api_token": "api-token",
        "max_body_bytes": 64 * 1024,
    }
    values.update(kw)
    return Settings(**values)


@pytest.fixture
def services(db: Engine) -> Services:
    """Services over the suite's database, a recording queue and fakeredis."""
    return Services(
        settings=settings(), engine=db, queue=RecordingQueue(), redis=fakeredis.FakeRedis()
    )


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
