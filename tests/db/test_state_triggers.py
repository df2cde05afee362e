"""The database itself refuses state writes outside fire() (migration 0006's triggers), on the
suite's database (SQLite by default, PostgreSQL when given)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.store.engine import make_engine
from bot.store.fire import fire, fire_in
from bot.store.migrate import downgrade, upgrade
from bot.store.writeguard import StateWriteRefused, state_writes
from tests.builders import binding_state, make_operation, operation

#: Raw SQL that writes state some way the old regex guard did not see, or plainly.
BYPASSES = {
    "schema-qualified": "UPDATE {schema}.bindings SET state = 'MERGED'",
    "lower case, an alias": "update bindings as b set state = 'MERGED'",
    "quoted identifiers": 'UPDATE "bindings" SET "state" = \'MERGED\'',
    "a comment between tokens": "UPDATE/**/bindings SET state = 'MERGED'",
    "a CTE": (
        "WITH x AS (SELECT id FROM bindings) "
        "UPDATE bindings SET state = 'MERGED' WHERE id IN (SELECT id FROM x)"
    ),
    "binding version": "UPDATE bindings SET version = version + 1",
    "binding owner": "UPDATE bindings SET operation_id = 'someone-else'",
    "step": "UPDATE operations SET step = 10103",
    "operation version": "UPDATE operations SET version = version + 1",
    "mr_iid": "UPDATE operations SET mr_iid = COALESCE(mr_iid, 0) + 1",
    "mr_opened_by_bot": "UPDATE operations SET mr_opened_by_bot = NOT mr_opened_by_bot",
    "approved_at": "UPDATE operations SET approved_at = CURRENT_TIMESTAMP",
    "approval_id": "UPDATE operations SET approval_id = 'forged'",
    "delete bindings": "DELETE FROM bindings",
    "delete operations": "DELETE FROM operations",
    "reword the audit log": "UPDATE audit_log SET to_state = 'MERGED', actor = 'nobody'",
    "erase the audit log": "DELETE FROM audit_log",
    "erase one change's trail": (
        "DELETE FROM audit_log WHERE operation_id IN (SELECT operation_id FROM bindings)"
    ),
    "insert a binding": (
        "INSERT INTO bindings (subject_id, target_key, operation_id, state, version, updated_at)"
        " VALUES ('s', 't', 'forged', 'MERGED', 1, CURRENT_TIMESTAMP)"
    ),
}
STATE_WRITE = "UPDATE bindings SET state = 'MERGED'"


@pytest.fixture
def merging(db: Engine) -> str:
    """An operation in MERGING (MR open, approved), the one row the bypasses try to move."""
    return make_operation(db, S.MERGING)


@pytest.fixture
def one_connection(db: Engine) -> Iterator[Engine]:
    """An engine on the suite's database whose pool holds exactly one connection."""
    engine = make_engine(db.url.render_as_string(hide_password=False), pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


def schema(db: Engine) -> str:
    return "public" if db.dialect.name == "postgresql" else "main"


def rows(db: Engine) -> dict[str, Any]:
    """Both state tables and the audit log, as they are."""
    with db.connect() as conn:
        return {
            t: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY 1"))]
            for t in ("bindings", "operations", "audit_log")
        }


def assert_refused(db: Engine, sql: str) -> StateWriteRefused:
    """Runs `sql` outside fire(): the database refuses it and nothing changes."""
    before = rows(db)
    with pytest.raises(StateWriteRefused) as refused, db.begin() as conn:
        conn.exec_driver_sql(sql)
    assert "outside fire()" in str(refused.value)
    assert isinstance(refused.value.__cause__, db.dialect.loaded_dbapi.IntegrityError)
    assert rows(db) == before
    return refused.value


def assert_refused_on(conn: Connection) -> None:
    """A raw state write on this connection, in its open transaction, is refused."""
    with pytest.raises(StateWriteRefused):
        conn.exec_driver_sql(STATE_WRITE)


@pytest.mark.parametrize("sql", BYPASSES.values(), ids=BYPASSES.keys())
@pytest.mark.usefixtures("merging")
def test_a_raw_state_write_is_refused_by_the_database(db: Engine, sql: str) -> None:
    """Each way of writing state around fire() (qualified, aliased, quoted, commented, in a
    CTE, each state column, a delete, an insert) is refused, the tables left as they were."""
    assert_refused(db, sql.format(schema=schema(db)))


@pytest.mark.usefixtures("merging")
def test_the_refusal_names_the_write_and_the_table(db: Engine) -> None:
    """An operator reading the error sees what was refused, on which table, and why."""
    error = assert_refused(db, "DELETE FROM operations")
    assert str(error).startswith("gitops: state write refused: DELETE on operations")
    error = assert_refused(db, "UPDATE audit_log SET detail = 'nothing happened'")
    assert str(error).startswith(
        "gitops: state write refused: UPDATE on audit_log outside fire() (it is append-only)"
    )


def test_a_raw_dbapi_connection_is_refused(db: Engine, merging: str) -> None:
    """A DBAPI connection used directly, past every SQLAlchemy event, is refused all the same."""
    raw = db.raw_connection()
    try:
        cursor = raw.cursor()
        with pytest.raises(db.dialect.loaded_dbapi.IntegrityError, match="state write refused"):
            cursor.execute(STATE_WRITE)
        raw.rollback()
    finally:
        raw.close()
    assert binding_state(db, merging) is S.MERGING


def test_a_connection_the_bot_did_not_open_is_refused(db: Engine, merging: str) -> None:
    """A client of its own (the sqlite3 shell, psql) cannot write state either; on SQLite it
    lacks the bot's function, so the write cannot even be prepared, while other columns can."""
    if db.dialect.name == "sqlite":
        database = db.url.database
        assert database is not None
        foreign: Any = sqlite3.connect(database)
        refusal: type[Exception] = sqlite3.OperationalError
    else:
        import psycopg

        foreign = psycopg.connect(db.url.set(drivername="postgresql").render_as_string(False))
        refusal = psycopg.IntegrityError
    try:
        with pytest.raises(refusal, match=r"gitops_fire_allowed|state write refused"):
            foreign.execute(STATE_WRITE)
        foreign.rollback()
        foreign.execute("UPDATE operations SET head_sha = 'from-a-shell'")
        foreign.commit()
    finally:
        foreign.close()
    assert binding_state(db, merging) is S.MERGING
    assert operation(db, merging)["head_sha"] == "from-a-shell"


def test_writes_that_change_no_state_column_pass(db: Engine, merging: str) -> None:
    """Other columns (remote references, times, leases) are written freely, and so is a state
    column set to the value it has."""
    with db.begin() as conn:
        conn.exec_driver_sql("UPDATE operations SET head_sha = 'abc', attempts = attempts + 1")
        conn.exec_driver_sql("UPDATE bindings SET state = state, updated_at = updated_at")
    assert operation(db, merging)["head_sha"] == "abc"
    assert binding_state(db, merging) is S.MERGING


def test_fire_and_state_writes_pass(db: Engine, merging: str) -> None:
    """fire() moves the state, and state_writes() opens the door for its block."""
    fire(db, TransitionRequest(merging, E.APPROVALS_GIVEN))
    assert binding_state(db, merging) is S.MERGING
    with db.begin() as conn, state_writes(conn):
        conn.exec_driver_sql("UPDATE bindings SET state = 'CLOSED'")
    assert binding_state(db, merging) is S.CLOSED


def test_the_door_closes_when_the_block_ends(db: Engine, merging: str) -> None:
    """Later in the same transaction, after state_writes() ended, a state write is refused."""
    with db.connect() as conn:
        tx = conn.begin()
        with state_writes(conn):
            pass
        assert_refused_on(conn)
        tx.rollback()
    assert binding_state(db, merging) is S.MERGING


def test_an_inner_block_leaves_the_outer_door_open(db: Engine, merging: str) -> None:
    """A state_writes() block inside another does not close the outer one's door as it ends."""
    with db.begin() as conn, state_writes(conn):
        with state_writes(conn):
            pass
        conn.exec_driver_sql("UPDATE bindings SET state = 'CLOSED'")
    assert binding_state(db, merging) is S.CLOSED


def test_the_door_closes_with_a_rollback(db: Engine, merging: str) -> None:
    """A block that fails rolls back; the connection's next transaction is refused again."""
    with db.connect() as conn:

        def failing_block() -> None:
            with conn.begin(), state_writes(conn):
                conn.exec_driver_sql("UPDATE bindings SET state = 'CLOSED'")
                raise RuntimeError("the block fails after its write")

        with pytest.raises(RuntimeError):
            failing_block()
        tx = conn.begin()
        assert_refused_on(conn)
        tx.rollback()
    assert binding_state(db, merging) is S.MERGING


def test_the_door_ends_with_its_transaction(db: Engine, merging: str) -> None:
    """A commit inside the block ends the door with the transaction it opened it for."""
    with db.connect() as conn:
        conn.begin()
        with state_writes(conn):
            conn.exec_driver_sql("UPDATE bindings SET state = 'CLOSED'")
            conn.commit()
            assert_refused_on(conn)
            conn.rollback()
    assert binding_state(db, merging) is S.CLOSED


@pytest.mark.usefixtures("merging")
def test_a_door_left_open_closes_when_the_pool_takes_the_connection_back(
    one_connection: Engine,
) -> None:
    """A block never exited (a leaked generator) leaves nothing open for the pooled
    connection's next user."""
    conn = one_connection.connect()
    dbapi = conn.connection.dbapi_connection
    leaked = state_writes(conn)  # held, so that no garbage collection ends the block
    leaked.__enter__()  # never exited
    conn.close()
    with one_connection.connect() as again:
        assert again.connection.dbapi_connection is dbapi
        tx = again.begin()
        assert_refused_on(again)
        tx.rollback()
    del leaked


def test_fires_door_does_not_outlive_its_transaction(
    db: Engine, merging: str, one_connection: Engine
) -> None:
    """After fire() commits, the same pooled connection cannot write state around it."""
    fire(one_connection, TransitionRequest(merging, E.APPROVALS_GIVEN))
    with pytest.raises(StateWriteRefused), one_connection.begin() as conn:
        conn.exec_driver_sql(STATE_WRITE)
    assert binding_state(db, merging) is S.MERGING


def test_downgrade_drops_the_triggers(db: Engine, merging: str) -> None:
    """Below 0006 the database refuses nothing; upgraded again, it refuses again."""
    downgrade(db, "0005")
    try:
        with db.begin() as conn:
            conn.exec_driver_sql("UPDATE bindings SET state = 'CLOSED'")
    finally:
        upgrade(db)
    assert binding_state(db, merging) is S.CLOSED
    assert_refused(db, STATE_WRITE)


# -- PostgreSQL only -----------------------------------------------------------------------------


@pytest.mark.pg
@pytest.mark.usefixtures("merging")
def test_public_bindings_is_refused_on_postgresql(db: Engine) -> None:
    """`UPDATE public.bindings`, which the old guard's pattern missed, is refused."""
    assert db.dialect.name == "postgresql"
    assert_refused(db, "UPDATE public.bindings SET state = 'MERGED'")


@pytest.mark.pg
@pytest.mark.usefixtures("merging")
def test_truncate_is_refused_on_postgresql(db: Engine) -> None:
    """TRUNCATE, which fires no DELETE trigger, is refused by a trigger of its own."""
    assert_refused(db, "TRUNCATE bindings, operations")
    assert_refused(db, "TRUNCATE audit_log")


@pytest.mark.pg
def test_one_transactions_door_opens_nothing_for_another(db: Engine, merging: str) -> None:
    """While fire() holds its transaction open (its door open), a second connection's state
    write is refused; the first then commits its transition."""
    other = make_operation(db, S.MERGING)
    with db.connect() as first, db.connect() as second, first.begin():
        fire_in(first, TransitionRequest(merging, E.MERGE_ERROR))
        # another row than the one `first` holds locked: a write waiting on it would hang
        with pytest.raises(StateWriteRefused), second.begin():
            second.execute(
                text("UPDATE bindings SET state = 'MERGED' WHERE operation_id = :op"),
                {"op": other},
            )
    assert binding_state(db, merging) is S.HANDLE_FAILED
    assert binding_state(db, other) is S.MERGING
