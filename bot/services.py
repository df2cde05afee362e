"""The long-lived objects of one process, built once by the composition root (gitops_bot)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.queueing import WorkQueue


@dataclass
class Services:
    """Shared by the web app, the workers and the CLI of one process."""

    settings: Settings
    engine: Engine
    queue: WorkQueue
    #: the Redis client under the queue (fakeredis when embedded); None in pure unit tests
    redis: Any = None

    def close(self) -> None:
        """Releases connections (tests and the CLI call this on the way out)."""
        self.engine.dispose()
