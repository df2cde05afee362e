"""Alembic migrations create exactly the schema the models describe."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Engine

from bot.store.models import Base


def test_migrations_match_models(db: Engine) -> None:
    """Autogenerate finds no difference between the migrated database and the models."""
    with db.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
