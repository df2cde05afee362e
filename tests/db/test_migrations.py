"""Alembic migrations create exactly the schema the models describe."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from bot.store.engine import make_engine
from bot.store.migrate import downgrade, upgrade
from bot.store.models import OUTBOX, Base, utcnow
from bot.store.outbox import Claimed, claim


def test_migrations_match_models(db: Engine) -> None:
    """Autogenerate finds no difference between the migrated database and the models."""
    with db.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_rows_the_old_dispatcher_called_dead_are_dead_after_0004(tmp_path: Path) -> None:
    """Unsent rows whose error starts `dead: ` (retried daily before 0004) become dead rows,
    never claimed again; the others stay as they were; 0004 goes down again."""
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite3'}")
    upgrade(engine, "0003")
    now = utcnow()
    rows = [
        ("dead: Forbidden: post status comment", None),
        ("NotFound: 404", None),
        ("dead: NotFound: labels", now),
    ]
    with engine.begin() as conn:
        for error, sent in rows:
            conn.execute(
                insert(OUTBOX).values(
                    operation_id="op",
                    effect="labels",
                    attempts=8,
                    next_attempt_at=now,
                    sent_at=sent,
                    last_error=error,
                    created_at=now,
                )
            )
    upgrade(engine)
    with engine.connect() as conn:
        dead = [r.dead_at is not None for r in conn.execute(select(OUTBOX).order_by(OUTBOX.c.id))]
    assert dead == [True, False, False]
    assert claim(engine, 10, now) == [Claimed(2, "op", "labels", 8)]
    downgrade(engine, "0003")
    engine.dispose()
