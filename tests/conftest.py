"""Shared fixtures: the database the suite runs on (SQLite by default, PostgreSQL when given)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from bot.store.models import Base
from bot.store.writeguard import state_writes

PG_URL = os.environ.get("GITOPS_TEST_DATABASE_URL", "").strip() or None
REDIS_URL = os.environ.get("GITOPS_TEST_REDIS_URL", "").strip() or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips PostgreSQL-only tests on the embedded default, with the reason shown."""
    skip_pg = pytest.mark.skip(reason="PostgreSQL only: set GITOPS_TEST_DATABASE_URL")
    skip_soak = pytest.mark.skip(reason="long soak: set GITOPS_SOAK=1")
    for item in items:
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
    """The database, emptied after each test."""
    yield engine
    tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
    with engine.begin() as conn, state_writes(conn):
        if engine.dialect.name == "postgresql":
            conn.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
        else:
            for name in tables:
                conn.execute(text(f"DELETE FROM {name}"))
