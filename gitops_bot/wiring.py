"""build_services(): the one place that turns Settings into the objects the bot runs on."""

from __future__ import annotations

from bot.config import Settings
from bot.services import Services
from bot.store.engine import make_engine
from jobs.connection import make_redis
from jobs.queue import RQWorkQueue


def build_services(settings: Settings) -> Services:
    """Engine, Redis (or fakeredis when embedded) and the work queue for these settings."""
    redis = make_redis(settings)
    return Services(
        settings=settings,
        engine=make_engine(settings.database_url),
        queue=RQWorkQueue(redis),
        redis=redis,
    )
