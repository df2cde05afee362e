"""What the CLI's tests share: the operator's environment (fixtures in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import Result
from sqlalchemy.engine import Engine

GITLAB = "https://gitlab.example.com"
AUTHOR_TOKEN = "author-token-cli-123"
WEBHOOK_SECRET = "hook-secret-cli-456"
PUBLIC = "https://bot.example.com"
#: A Redis URL nothing listens on: with the `queue` fixture, the CLI's queue reaches the bot.
REDIS_URL = "redis://127.0.0.1:1/0"

#: `gitops-bot <args>` with the operator's environment (the `run` fixture).
Run = Callable[..., Result]


def database_url(engine: Engine) -> str:
    """The suite database's URL, password included, as GITOPS_DATABASE_URL."""
    return engine.url.render_as_string(hide_password=False)
