"""The Redis connection and queue the jobs use: a real server, or fakeredis when embedded."""

from __future__ import annotations

from redis import Redis

from bot.config import Settings

#: The one work queue; periodic jobs and delayed jobs land here too.
QUEUE_NAME = "gitops"


def make_redis(settings: Settings) -> Redis:
    """A Redis client for GITOPS_REDIS_URL, or an in-process fakeredis when it is unset."""
    if settings.redis_url:
        return Redis.from_url(settings.redis_url)
    import fakeredis

    redis: Redis = fakeredis.FakeRedis()
    return redis
