"""What the health endpoints and `gitops-bot doctor` read: whether the database answers and its
schema revision (the work waiting in it is the scrape's: bot/store/gauges.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError


def database_ready(engine: Engine) -> str:
    """`ok` when the database answers `SELECT 1`, else the name of the error it raised."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return type(exc).__name__
    return "ok"


@dataclass(frozen=True)
class SchemaState:
    """The database's schema revision against the migrations' head, or why it was not read."""

    #: the error's name when the database could not be read (then `current` is None)
    error: str | None
    #: the revision the database is at (None: no schema, or not read)
    current: str | None
    head: str

    @property
    def at_head(self) -> bool:
        """The database answered and is migrated to the head revision."""
        return self.error is None and self.current == self.head


def schema_state(engine: Engine) -> SchemaState:
    """Reads alembic's revision from the database (one query) and the head from the scripts."""
    # imported here: the web process's health endpoints need none of alembic
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from bot.store.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() or ""
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:
        return SchemaState(type(exc).__name__, None, head)
    return SchemaState(None, current, head)
