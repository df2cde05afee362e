"""Helpers for the REST API tests: a fake work queue and the app built around the test database."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine
from werkzeug.test import TestResponse

from bot.config import Settings
from bot.queueing import QueueUnavailable
from bot.services import Services
from webhooks import create_app

TOKEN = "t"
PUBLIC_URL = "http://bot.test"
ALLOWED = ("config/", "deploy/values.yaml")


@dataclass
class FakeQueue:
    """Records what is enqueued; its length can be set and it can be switched off."""

    waiting: int = 0
    down: bool = False
    enqueued: list[tuple[str, tuple[object, ...], str | None]] = field(default_factory=list)

    def enqueue(self, func: str, *args: object, job_id: str | None = None) -> None:
        """Records the job, or raises QueueUnavailable when the queue is down."""
        if self.down:
            raise QueueUnavailable("fake queue is down")
        self.enqueued.append((func, args, job_id))

    def enqueue_in(
        self, seconds: float, func: str, *args: object, job_id: str | None = None
    ) -> None:
        """Records the job as if it were due now."""
        self.enqueue(func, *args, job_id=job_id)

    def length(self) -> int:
        """The settable length, or QueueUnavailable when down."""
        if self.down:
            raise QueueUnavailable("fake queue is down")
        return self.waiting

    def drives(self) -> list[str]:
        """Operation ids a drive job was enqueued for."""
        return [str(args[0]) for func, args, _ in self.enqueued if func == "jobs.drive.drive"]


def fake_services(engine: Engine, **settings: Any) -> Services:
    """The services of a process on `engine` whose queue is a FakeQueue (settings overridable)."""
    return Services(
        settings=Settings(database_url=str(engine.url), **settings),
        engine=engine,
        queue=FakeQueue(),
    )


@dataclass
class Api:
    """The app, its test client and fake queue, with a request helper carrying the token."""

    app: Flask
    client: FlaskClient
    queue: FakeQueue
    engine: Engine

    @classmethod
    def build(cls, engine: Engine, **settings: Any) -> Api:
        """An app on `engine` with the test token, public URL and allowed paths (overridable)."""
        values: dict[str, Any] = {
            "database_url": str(engine.url),
            "api_token": TOKEN,
            "public_url": PUBLIC_URL,
            "allowed_paths": ALLOWED,
        }
        values.update(settings)
        queue = FakeQueue()
        app = create_app(services=Services(settings=Settings(**values), engine=engine, queue=queue))
        app.testing = True
        return cls(app=app, client=app.test_client(), queue=queue, engine=engine)

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | str | None = None,
        token: str | None = TOKEN,
        headers: dict[str, str] | None = None,
    ) -> TestResponse:
        """One request to the app, authenticated with `token` unless it is None."""
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return self.client.open(path, method=method, json=json, data=data, headers=sent)

    def submit(self, body: dict[str, Any], **kw: Any) -> TestResponse:
        """POST /api/v1/changes."""
        return self.call("POST", "/api/v1/changes", json=body, **kw)


_n = iter(range(1, 1_000_000))


def change_body(**kw: Any) -> dict[str, Any]:
    """A valid change request body; every field can be overridden (None removes it)."""
    n = next(_n)
    body: dict[str, Any] = {
        "subject_id": f"service-{n}",
        "target_key": "config/prod.yaml",
        "project": "platform/config",
        "target_branch": "main",
        "title": f"Scale service {n}",
        "description": "More replicas for the launch.",
        "files": [{"path": "config/prod.yaml", "content": "replicas: 3\n"}],
        "requested_by": "alice",
    }
    body.update(kw)
    return {k: v for k, v in body.items() if v is not None}
