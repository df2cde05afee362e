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
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import make_url, text
from sqlalchemy.engine import Engine

from bot.core.events import Event
from bot.core.request import TransitionRequest
from bot.core.states import BindingState
from bot.store import fire as fire_module
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from tests.builders import make_operation

SCHEMA = "gitops_bench"
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


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
        result = fire_module.fire(
            engine, TransitionRequest(op_id, Event.RETRY), current=held[0] if carry else None
        )
        held[0] = result.current

    return work


def pgbench_rate(url: str, seconds: float) -> float | None:
    """The same CAS UPDATE driven by pgbench (one client, its own connection), when installed."""
    if shutil.which("pgbench") is None:
        return None
    parts = make_url(url)
    script = Path(tempfile.mkstemp(suffix=".sql")[1])
    script.write_text(
        f"UPDATE {SCHEMA}.bench_plain SET version = version + 1 WHERE id = 1 AND version >= 0;\n"
    )
    out = subprocess.run(
        [
            "pgbench",
            "-n",
            "-c",
            "1",
            "-T",
            str(max(1, int(seconds))),
            "-f",
            str(script),
            "-h",
            parts.host or "127.0.0.1",
            "-p",
            str(parts.port or 5432),
            "-U",
            parts.username or "postgres",
            parts.database or "postgres",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"tps = ([\d.]+)", out.stdout)
    return float(found.group(1)) if found else None


def measure(url: str = DEFAULT_URL, seconds: float = 5.0) -> dict[str, float | None]:
    """Rates per second of (a) plain CAS, (b) fire holding its read, (c) fire reading first,
    (d) (c) on the portable write, and pgbench's rate for (a)."""
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    admin.dispose()
    sep = "&" if "?" in url else "?"
    engine = make_engine(f"{url}{sep}options=-csearch_path%3D{SCHEMA}", pool_size=1)
    upgrade(engine)
    try:
        plain = rate(plain_cas(engine), seconds)
        carried = rate(fire_retry(engine, carry=True), seconds)
        reading = rate(fire_retry(engine, carry=False), seconds)
        original = fire_module.write_path
        fire_module.write_path = lambda dialect: fire_module._write_generic
        try:
            generic = rate(fire_retry(engine, carry=False), seconds)
        finally:
            fire_module.write_path = original
        pgbench = pgbench_rate(url, seconds)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
        engine.dispose()
    return {
        "plain": plain,
        "fire_held": carried,
        "fire_reading": reading,
        "fire_portable": generic,
        "pgbench": pgbench,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    figures = measure(args.url, args.seconds)
    plain = figures["plain"] or 1.0
    rows = [
        ("(a) plain CAS UPDATE + commit", figures["plain"], ""),
        ("(b) fire(), holding the operation it read", figures["fire_held"], "  (target >= 0.5)"),
        ("(c) fire(), reading the operation first", figures["fire_reading"], ""),
        ("(d) (c) with the portable multi-statement write", figures["fire_portable"], ""),
        ("(e) (a) driven by pgbench", figures["pgbench"], ""),
    ]
    for label, value, note in rows:
        if value is not None:
            print(f"{label:<50} {value:7.0f} /s  ratio to (a) {value / plain:.2f}{note}")


if __name__ == "__main__":
    main()
