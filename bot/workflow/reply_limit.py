"""One reply per user and MR per window: the bot's note rate limit is kept for status comments.

Anyone who can comment (members or not) could otherwise make the author account post without
end (`/gitops help`, refusals), spending the GitLab note rate limit the status comments need.
A reply is posted only after `claim_reply` took the user's slot on the MR: one statement, an
INSERT that on conflict updates the row only when its last reply is older than the window; the
row count says whether this caller won. Two workers at once cannot both win (the unique key
serialises them on SQLite and PostgreSQL alike). The emoji reaction is never limited.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine

from bot.store.models import COMMAND_REPLIES, utcnow


def claim_reply(
    engine: Engine,
    *,
    project_id: int,
    mr_iid: int,
    user_id: int,
    window: float,
    now: datetime | None = None,
) -> bool:
    """Takes the user's reply slot on the MR; False when they had a reply within `window`
    seconds (then no reply may be posted)."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=window)
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
