"""The reply window's table: one row per user and MR, holding when the bot last replied to them.

`claim_slot` is one statement, an INSERT that on conflict updates the row only when its last
reply is older than the cutoff; the row it returns says whether this caller won. Two workers at
once cannot both win (the unique key serialises them on SQLite and PostgreSQL alike).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine

from bot.store.models import COMMAND_REPLIES


def claim_slot(
    engine: Engine,
    *,
    project_id: int,
    mr_iid: int,
    user_id: int,
    now: datetime,
    cutoff: datetime,
) -> bool:
    """Stamps the user's reply on the MR at `now` unless it has one after `cutoff`; True: won."""
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    table = COMMAND_REPLIES
    upsert = (
        insert(table)
        .values(project_id=project_id, mr_iid=mr_iid, user_id=user_id, last_reply_at=now)
        .on_conflict_do_update(
            index_elements=[table.c.project_id, table.c.mr_iid, table.c.user_id],
            set_={"last_reply_at": now},
            where=table.c.last_reply_at < cutoff,
        )
    )
    stmt = upsert.returning(table.c.id)
    # the returned row says whether this caller inserted or updated it (psycopg's rowcount for
    # INSERT ... ON CONFLICT is not 1 here, so it cannot tell)
    with engine.begin() as conn:
        return conn.execute(stmt).first() is not None
