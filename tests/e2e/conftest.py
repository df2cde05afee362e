"""Fixtures of the end-to-end suite: a started `World` per test, logs shown on failure.

These scenarios need Redis (the Procfile's processes coordinate through it and the database):
they use GITOPS_TEST_REDIS_URL, as the rest of the suite does, and the suite's database:
PostgreSQL when GITOPS_TEST_DATABASE_URL is given (CI gives both), else the suite's SQLite file,
which the processes share (WAL, BEGIN IMMEDIATE: writes take turns). They are skipped with that
reason on the embedded pass, which has no Redis (running them there on a guessed server would
run the whole suite twice in CI, on a server CI did not name). The demo scenario needs no
servers and runs in both passes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest
from redis import Redis
from sqlalchemy.engine import Engine

from tests.conftest import REDIS_URL
from tests.e2e.world import World

NEEDS_SERVERS = (
    "e2e on real processes needs Redis: set GITOPS_TEST_REDIS_URL (.ci/run does, with "
    "GITOPS_TEST_DATABASE_URL: PostgreSQL; without it they run on the suite's SQLite file)"
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Keeps each phase's report on the item, so fixtures know whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def servers() -> None:
    """Skips the scenario when no Redis was given."""
    if REDIS_URL is None:
        pytest.skip(NEEDS_SERVERS)


@pytest.fixture
def e2e_redis(servers: None) -> Iterator[Redis]:
    """The suite's Redis database, empty before and after the scenario."""
    assert REDIS_URL is not None
    client = Redis.from_url(REDIS_URL)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def make_world(
    servers: None,
    db: Engine,
    e2e_redis: Redis,
    tmp_path: Any,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., World]]:
    """Starts the world (options as for `World.start`); stops it and shows logs on failure."""
    started: list[World] = []

    def make(**options: Any) -> World:
        world = World(db, e2e_redis, tmp_path / "logs")
        started.append(world)
        return world.start(**options)

    yield make
    for world in started:
        world.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for name in world.cluster.procs:
                request.node.add_report_section(
                    "teardown", f"log of {name}", world.cluster.tail(name, 60)
                )


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    """The world with two web instances, two workers and the scheduler."""
    return make_world()
