"""A Bot per test: fakeredis by default, the real Redis when GITOPS_TEST_REDIS_URL is given."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

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


@pytest.fixture
def make_bot(db: Engine, redis: Redis) -> Iterator[Callable[..., Bot]]:
    """Makes the bot with settings of the test's own (at most one per test)."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        made: list[Bot] = []

        def make(**settings: Any) -> Bot:
            made.append(Bot(db, redis, rsps, **settings))
            return made[-1]

        yield make
        for bot in made:
            bot.close()
