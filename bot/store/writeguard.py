"""Refuses any write to a state column that does not come through fire().

Checked at the cursor, so it catches ORM flushes, Core statements and raw SQL alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from bot.errors import GitopsError

_TOKEN = "gitops_fire"

# An INSERT into either table, or an UPDATE whose SET touches state, step, version or a column
# the guards read (those change only through fire(), which bumps the version).
_INSERT = re.compile(r"\bINSERT\s+INTO\s+\"?(bindings|operations)\"?[\s(]", re.IGNORECASE)
_UPDATE = re.compile(
    r"\bUPDATE\s+\"?(bindings|operations)\"?\s+SET\s+(?P<set>.*?)(\bWHERE\b|\bRETURNING\b|$)",
    re.IGNORECASE | re.DOTALL,
)
_STATE_COLUMN = re.compile(
    r"(^|[\s,])\"?(state|step|version|mr_iid|mr_opened_by_bot|approved_at|approval_id)\"?\s*=",
    re.IGNORECASE,
)


class StateWriteRefused(GitopsError):
    """A state, step or version column was written outside fire()."""


def touches_state(sql: str) -> bool:
    """True when the statement inserts an operation/binding or writes one's state columns."""
    if _INSERT.search(sql):
        return True
    return any(_STATE_COLUMN.search(m.group("set")) for m in _UPDATE.finditer(sql))


@contextmanager
def state_writes(conn: Connection) -> Iterator[None]:
    """Lets this connection write state columns for the duration (used by fire() only)."""
    conn.info[_TOKEN] = True
    try:
        yield
    finally:
        conn.info.pop(_TOKEN, None)


def install(engine: Engine) -> None:
    """Adds the check to every statement this engine runs."""

    @event.listens_for(engine, "before_cursor_execute")
    def _check(
        conn: Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        if not conn.info.get(_TOKEN) and touches_state(statement):
            raise StateWriteRefused(
                "state columns of operations/bindings change only through fire(): "
                + statement.split("\n", 1)[0][:120]
            )
