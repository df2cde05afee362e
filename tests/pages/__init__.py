"""Helpers for the dashboard tests: the app on the suite's database, and requests to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import update
from sqlalchemy.engine import Engine
from werkzeug.test import TestResponse

from bot.config import Settings
from bot.services import Services
from bot.store.models import OPERATIONS
from tests.api import FakeQueue
from webhooks import create_app

TOKEN = "dashboard-token-123"
WEBHOOK_SECRET = "hook-secret-value-987"


@dataclass
class Pages:
    """The app and its test client; `get` sends the API token unless told otherwise."""

    app: Flask
    client: FlaskClient
    engine: Engine

    @classmethod
    def build(cls, engine: Engine, **settings: Any) -> Pages:
        """An app on `engine` with the test token (settings overridable)."""
        values: dict[str, Any] = {
            "database_url": str(engine.url),
            "api_token": TOKEN,
            "webhook_secret": WEBHOOK_SECRET,
            "public_url": "http://bot.test",
        }
        values.update(settings)
        services = Services(settings=Settings(**values), engine=engine, queue=FakeQueue())
        app = create_app(services=services)
        app.testing = True
        return cls(app=app, client=app.test_client(), engine=engine)

    def get(
        self, path: str, *, token: str | None = TOKEN, headers: dict[str, str] | None = None
    ) -> TestResponse:
        """GET `path`, with `Authorization: Bearer <token>` unless token is None."""
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return self.client.get(path, headers=sent)

    def text(self, path: str) -> str:
        """The page's HTML (asserting it was served)."""
        response = self.get(path)
        assert response.status_code == 200, response.data[:500]
        return response.get_data(as_text=True)


def set_times(engine: Engine, operation_id: str, **columns: Any) -> None:
    """Moves an operation's bookkeeping times (updated_at, deadline_at) for age tests."""
    with engine.begin() as conn:
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == operation_id).values(**columns))
