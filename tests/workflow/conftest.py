"""A Bot per test: fakeredis by default, the real Redis when GITOPS_TEST_REDIS_URL is given."""

from __future__ import annotations

from collections.abc import Iterator

import fakeredis
import pytest
import responses
from redis import Redis
from sqlalchemy.engine import Engine

from tests.conftest import REDIS_URL
from tests.workflow.harness import Bot


@pytest.fixture
def redis() -> Iterator[Redis]:
    """An empty Redis for the test."""
    if REDIS_URL is None:
        yield fakeredis.FakeRedis()
        return
    client = Redis.from_url(REDIS_URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def bot(db: Engine, redis: Redis) -> Iterator[Bot]:
    """The bot with its doubles, wired like production."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        bot = Bot(db, redis, rsps)
        yield bot
        bot.close()
