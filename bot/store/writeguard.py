"""The door through which fire() writes state; the database refuses every other state write.

Migration 0006 puts triggers on `operations` and `bindings`: an INSERT or a DELETE (and on
PostgreSQL a TRUNCATE), or an UPDATE that changes a state column (state, step, version, the
owner, the columns the guards read), is refused by the database itself, whatever the SQL looks
like and whoever sends it (an ORM flush, raw SQL, psql, a raw DBAPI connection), unless the
transaction opened the door with `state_writes(conn)`:

- PostgreSQL: the transaction-local setting `gitops.fire` (`set_config(..., true)`), so it
  ends with the transaction whatever happens and opens nothing for another connection.
  fire()'s one-statement write opens it in that statement (`OPEN_POSTGRES` as a CTE): a round
  trip saved on the hot path; it then stays open to the end of fire()'s transaction.
- SQLite: a flag on the DBAPI connection, read by `gitops_fire_allowed()`, a function
  `install()` registers on each connection the engine opens. It is cleared when the block
  ends, at commit and rollback, and when the pool takes the connection back. A connection
  that lacks the function (the sqlite3 shell, another program) cannot prepare a state write at
  all ("no such function: gitops_fire_allowed"), which refuses it too.

What the door does not stop: a PostgreSQL superuser disabling triggers (`ALTER TABLE ... DISABLE
TRIGGER`, `session_replication_role`), a session-level `SET gitops.fire = 'on'`, or on SQLite
an `UPDATE OR REPLACE` deleting a conflicting row (REPLACE fires no delete trigger unless
recursive_triggers is on). It is a guard against mistakes, not against the database's owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, ExceptionContext

from bot.errors import GitopsError

#: The SQLSTATE the PostgreSQL trigger raises (class 23: integrity constraint violation).
SQLSTATE = "23G01"
#: How the refusal starts, on both databases.
PREFIX = "gitops: state write refused"
#: Opens the door for the rest of the transaction on PostgreSQL (fire_sql uses it in its CTE).
OPEN_POSTGRES = "SELECT set_config('gitops.fire', 'on', true)"
# the setting as it was (read in a subquery that OFFSET 0 keeps apart, so first), then opened
_OPEN_POSTGRES_FROM = (
    "SELECT previous, set_config('gitops.fire', 'on', true) "
    "FROM (SELECT current_setting('gitops.fire', true) AS previous OFFSET 0) AS before"
)
_RESTORE_POSTGRES = "SELECT set_config('gitops.fire', %(previous)s, true)"
#: The SQLite door of one DBAPI connection, in its pool record's info.
_DOOR = "gitops_fire_door"


class StateWriteRefused(GitopsError):
    """A state, step or version column was written outside fire()."""


class _Door:
    """One SQLite connection's flag, as gitops_fire_allowed() reads it."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = False

    def allowed(self) -> int:
        return 1 if self.open else 0


@contextmanager
def state_writes(conn: Connection) -> Iterator[None]:
    """Lets this connection's transaction write state rows for the block (fire() and submit);
    a block inside another leaves the door as the outer one had it."""
    if conn.dialect.name == "postgresql":
        previous = conn.exec_driver_sql(_OPEN_POSTGRES_FROM).scalar()
        yield
        # not reached when the block raises: a failed transaction takes no more statements,
        # and its rollback closes the door
        conn.exec_driver_sql(_RESTORE_POSTGRES, {"previous": previous or ""})
        return
    door = _door(conn)
    previous_open, door.open = door.open, True
    try:
        yield
    finally:
        door.open = previous_open


def _door(conn: Connection) -> _Door:
    door = conn.connection.info.get(_DOOR)
    if not isinstance(door, _Door):
        raise RuntimeError("this SQLite engine was not made by make_engine(): no state door")
    return door


def refusal(error: BaseException) -> bool:
    """True when a DBAPI error is the state triggers' refusal."""
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate is not None:
        return bool(sqlstate == SQLSTATE)
    return str(error).startswith(PREFIX)


def install(engine: Engine) -> None:
    """Gives each connection its door (SQLite) and turns the refusal into StateWriteRefused."""

    @event.listens_for(engine, "handle_error")
    def _refused(context: ExceptionContext) -> None:
        original = context.original_exception
        if refusal(original):
            raise StateWriteRefused(str(original).split("\n", 1)[0]) from original

    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, record: Any) -> None:
        door = _Door()
        record.info[_DOOR] = door
        dbapi_conn.create_function("gitops_fire_allowed", 0, door.allowed)

    def _close(conn: Connection) -> None:
        if conn.invalidated:  # its DBAPI connection is gone, and its door with it
            return
        door = conn.connection.info.get(_DOOR)
        if isinstance(door, _Door):
            door.open = False

    event.listen(engine, "commit", _close)
    event.listen(engine, "rollback", _close)

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_conn: Any, record: Any) -> None:
        door = record.info.get(_DOOR)
        if isinstance(door, _Door):
            door.open = False
