"""fire() against a plain single-row CAS UPDATE, side by side on the same PostgreSQL.

Usage: .venv/bin/python -m tests.bench.bench_fire [--url URL] [--seconds 5]

(a) `UPDATE ... SET version = version + 1 WHERE id = ? AND version = ?` and COMMIT;
(b) fire() as a job calls it, holding the operation it just read (or the previous result):
    table check, binding + operation CAS, audit row and two outbox rows in one statement;
(c) fire() doing its own read first (one more round trip);
(d) (c) forced onto the portable multi-statement write (the SQLite path), to show the lever.
Prints each rate and the ratios to (a) (target b/a >= 0.5). Runs in its own schema.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import Engine

from bot.core.events import Event
from bot.core.states import BindingState
from bot.store import fire as fire_module
from bot.store import fire_sql
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from tests.builders import make_operation

SCHEMA = "gitops_bench"


def rate(work: Callable[[], None], seconds: float) -> float:
    """Calls per second of `work` over about `seconds` (after a short warm-up)."""
    for _ in range(50):
        work()
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(50):
            work()
        done += 50
    return done / (time.perf_counter() - started)


def plain_cas(engine: Engine) -> Callable[[], None]:
    """A single-row compare-and-set UPDATE with commit, reading nothing first."""
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS bench_plain"))
        conn.execute(text("CREATE TABLE bench_plain (id int primary key, version int not null)"))
        conn.execute(text("INSERT INTO bench_plain VALUES (1, 0)"))
    version = [0]
    stmt = text("UPDATE bench_plain SET version = version + 1 WHERE id = 1 AND version = :v")

    def work() -> None:
        with engine.begin() as conn:
            assert conn.execute(stmt, {"v": version[0]}).rowcount == 1
        version[0] += 1

    return work


def fire_retry(engine: Engine, *, carry: bool) -> Callable[[], None]:
    """fire(RETRY) on a MERGING operation with an MR: CAS, audit and two outbox rows."""
    op_id = make_operation(engine, BindingState.MERGING)
    with engine.connect() as conn:
        held = [fire_module.load_current(conn, op_id)]

    def work() -> None:
        result = fire_module.fire(engine, op_id, Event.RETRY, current=held[0] if carry else None)
        held[0] = result.current

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    admin = make_engine(args.url)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    admin.dispose()
    sep = "&" if "?" in args.url else "?"
    engine = make_engine(f"{args.url}{sep}options=-csearch_path%3D{SCHEMA}", pool_size=1)
    upgrade(engine)

    plain = rate(plain_cas(engine), args.seconds)
    carried = rate(fire_retry(engine, carry=True), args.seconds)
    reading = rate(fire_retry(engine, carry=False), args.seconds)
    original = fire_sql.write_postgres
    fire_sql.write_postgres = fire_module._write_generic  # type: ignore[assignment]
    try:
        generic = rate(fire_retry(engine, carry=False), args.seconds)
    finally:
        fire_sql.write_postgres = original
    print(f"database: {engine.url.render_as_string(hide_password=True)} (schema {SCHEMA})")
    rows = [
        ("(a) plain CAS UPDATE + commit", plain, ""),
        ("(b) fire(), holding the operation it read", carried, "  (target >= 0.5)"),
        ("(c) fire(), reading the operation first", reading, ""),
        ("(d) (c) with the portable multi-statement write", generic, ""),
    ]
    for label, value, note in rows:
        print(f"{label:<50} {value:7.0f} /s  ratio to (a) {value / plain:.2f}{note}")
    with engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
    engine.dispose()


if __name__ == "__main__":
    main()
