"""The CLI's fixtures: an operator's shell on the suite's database, and a queue that reaches
the bot."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.services import Services
from bot.store.engine import make_engine
from gitops_bot import ops
from gitops_bot.cli import main
from tests.api import FakeQueue
from tests.cli import AUTHOR_TOKEN, GITLAB, PUBLIC, WEBHOOK_SECRET, Run, database_url


@pytest.fixture
def env(db: Engine) -> dict[str, str | None]:
    """The environment of an operator's shell on the embedded default (no Redis)."""
    return {
        "GITOPS_DATABASE_URL": database_url(db),
        "GITOPS_REDIS_URL": None,
        "GITOPS_GITLAB_URL": GITLAB,
        "GITOPS_GITLAB_TOKEN": AUTHOR_TOKEN,
        "GITOPS_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "GITOPS_PUBLIC_URL": PUBLIC,
        "GITOPS_PROJECTS": None,
    }


@pytest.fixture
def run(env: dict[str, str | None]) -> Run:
    """`gitops-bot <args>` with that environment (overridable per call)."""

    def invoke(*args: str, **overrides: str | None) -> Result:
        return CliRunner().invoke(main, list(args), env={**env, **overrides})

    return invoke


@pytest.fixture
def queue(monkeypatch: pytest.MonkeyPatch) -> FakeQueue:
    """The queue the commands' services get: with GITOPS_REDIS_URL set (REDIS_URL), the CLI
    treats it as reaching the bot's workers; what is enqueued is recorded."""
    fake = FakeQueue()

    def services(settings: Settings) -> Services:
        engine = make_engine(settings.database_url)
        return Services(settings=settings, engine=engine, queue=fake)

    monkeypatch.setattr(ops, "build_services", services)
    return fake
