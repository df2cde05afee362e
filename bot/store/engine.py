"""Engine creation for SQLite (the embedded default) and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as Engine  # the type the layers above hold, from here
from sqlalchemy.orm import Session, sessionmaker

from bot.store import writeguard


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine with the state door (writeguard); SQLite gets WAL and IMMEDIATE transactions."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )
        _sqlite_setup(engine)
    else:
        # no pre-ping: it costs a round trip per checkout; a connection that died with the
        # database fails its statement, is discarded, and the caller's fallback or retry runs
        kwargs.setdefault("pool_recycle", 1800)
        kwargs.setdefault("pool_size", 10)
        kwargs.setdefault("max_overflow", 20)
        engine = create_engine(url, **kwargs)
    writeguard.install(engine)
    return engine


def _sqlite_setup(engine: Engine) -> None:
    # pysqlite's own transaction handling starts transactions lazily and deferred, so a read
    # followed by a write can fail with "database is locked" without waiting; take the write
    # lock up front instead (SQLAlchemy docs, "Serializable isolation / Savepoints / DDL").
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode=WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            conn.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions owned by the caller: `with factory.begin() as session: ...`."""
    return sessionmaker(engine, expire_on_commit=False)
