"""Explicit wiring: the one place that turns Settings into the objects the bot runs on."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.store.engine import make_engine


@dataclass
class Services:
    """Long-lived objects shared by the web app, the workers and the CLI of one process."""

    settings: Settings
    engine: Engine

    def close(self) -> None:
        """Releases connections (tests and the CLI call this on the way out)."""
        self.engine.dispose()


def build_services(settings: Settings) -> Services:
    """Builds the services for these settings; nothing is read from the environment here."""
    return Services(settings=settings, engine=make_engine(settings.database_url))
