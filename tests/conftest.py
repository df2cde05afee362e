"""Shared fixtures: the database the suite runs on (SQLite by default, PostgreSQL when given)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from bot.gitlab import version as gitlab_version
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from bot.store.models import Base
from bot.store.writeguard import state_writes
from tests.e2e import figures

#: pytest-xdist's name for this process ("gw0", "gw1", ...), None when pytest runs alone.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER") or None


def _own_database(url: str | None) -> str | None:
    """With pytest-xdist, each process gets its own PostgreSQL database beside the given one
    (`test` -> `test_gw0`, created when missing), so the processes never truncate each other's
    tables. Concurrency tests open their own connections inside that database."""
    if url is None or XDIST_WORKER is None:
        return url
    given = make_url(url)
    name = f"{given.database}_{XDIST_WORKER}"
    admin = create_engine(given, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            found = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if found is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return given.set(database=name).render_as_string(hide_password=False)


def _own_redis_db(url: str | None) -> str | None:
    """With pytest-xdist, each process gets its own Redis database: the given number minus the
    worker's (15 -> 15 for gw0, 14 for gw1)."""
    if url is None or XDIST_WORKER is None:
        return url
    base, _, number = url.rpartition("/")
    return f"{base}/{int(number or 0) - int(XDIST_WORKER.removeprefix('gw'))}"


PG_URL = _own_database(os.environ.get("GITOPS_TEST_DATABASE_URL", "").strip() or None)
REDIS_URL = _own_redis_db(os.environ.get("GITOPS_TEST_REDIS_URL", "").strip() or None)


#: Files whose tests take tens of seconds to minutes each (the random orders, the fuzzers, the
#: live API's schemathesis run, the browser): started first, so that the two pytest-xdist
#: processes finish together instead of one running a long test alone at the end.
LONG_FIRST = (
    "tests/workflow/test_random_order.py",
    "tests/hardening/test_inert_fuzz.py",
    "tests/hardening/test_fuzz.py",
    "tests/api/test_schemathesis.py",
    "tests/api/test_paths_api.py",
    "tests/pages/test_browser.py",
    "tests/cli/test_log_lines.py",
    "tests/db/test_races.py",
    "tests/unit/test_packaging.py",
)


def _start_order(item: pytest.Item) -> int:
    """0 for the scenarios on real processes (one group of several minutes), 1 for LONG_FIRST,
    2 for the rest; the collection's order is kept within each."""
    if "e2e" in item.keywords:
        return 0
    return 1 if item.nodeid.startswith(LONG_FIRST) else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips PostgreSQL-only tests on the embedded default, with the reason shown; keeps the
    scenarios on real processes in one pytest-xdist process (`--dist loadgroup`), one at a time,
    as they were written to run (each starts its own web, workers and scheduler); starts the
    longest work first (`_start_order`)."""
    items.sort(key=_start_order)
    skip_pg = pytest.mark.skip(reason="PostgreSQL only: set GITOPS_TEST_DATABASE_URL")
    skip_soak = pytest.mark.skip(reason="long soak: set GITOPS_SOAK=1")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("e2e"))
        if "pg" in item.keywords and PG_URL is None:
            item.add_marker(skip_pg)
        if "soak" in item.keywords and os.environ.get("GITOPS_SOAK") != "1":
            item.add_marker(skip_soak)


def _reset_schema(engine: Engine) -> None:
    """Drops every table (ours and Alembic's) so migrations start from nothing."""
    with engine.begin() as conn:
        Base.metadata.drop_all(conn)
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The suite's database, migrated to head once per run."""
    if PG_URL is not None:
        eng = make_engine(PG_URL)
        _reset_schema(eng)
    else:
        path: Path = tmp_path_factory.mktemp("db") / "test.sqlite3"
        eng = make_engine(f"sqlite:///{path}")
    upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    """The database, emptied after each test: every table's rows deleted (children first) and,
    on PostgreSQL, every sequence restarted, so ids start at 1 again as after TRUNCATE ...
    RESTART IDENTITY. Not TRUNCATE itself: it costs about 45 ms per test on these nine small
    tables (new files for each), DELETE and ALTER SEQUENCE about 4 ms, over 2,000 tests a pass."""
    yield engine
    tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
    with engine.begin() as conn, state_writes(conn):
        for name in tables:
            conn.execute(text(f"DELETE FROM {name}"))
        if engine.dialect.name == "postgresql":
            sequences = conn.execute(
                text("SELECT sequence_name FROM information_schema.sequences")
            ).scalars()
            for name in sequences:
                conn.execute(text(f'ALTER SEQUENCE "{name}" RESTART'))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Figures a test recorded travel with its report, to the controller's summary."""
    outcome = yield
    report = outcome.get_result()
    report.user_properties.extend((figures.PROPERTY, f) for f in figures.unreported())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Learns the e2e figures a report carries (from a pytest-xdist process, or this one)."""
    for key, value in report.user_properties:
        if key == figures.PROPERTY:
            figures.learn(*value)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Prints the figures the tests measured (the e2e scenarios, the live API's schemathesis
    run), and writes them to artifacts/."""
    if not figures.FIGURES:
        return
    terminalreporter.section("figures the tests measured")
    for line in figures.lines():
        terminalreporter.write_line(line)
    figures.save()


@pytest.fixture(autouse=True)
def _gitlab_version_forgotten() -> Iterator[None]:
    """Each test meets its own GitLab: the version the bot read of another is forgotten."""
    gitlab_version.forget()
    yield
    gitlab_version.forget()
