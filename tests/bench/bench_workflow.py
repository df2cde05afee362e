"""Waiting costs no threads; one sweep and one reconcile stay constant in queries over 100k rows.

Usage: .venv/bin/python -m tests.bench.bench_workflow [--url URL] [--redis URL]
          [--waiting 10000] [--rows 100000]

1. 10,000 operations wait on their MR pipeline: each is a row with a deadline plus one delayed
   poll job in Redis. Prints the process's threads before and after, and Redis memory used.
2. 100,000 operations in the database (waiting, merged, done): one sweep (with 1% overdue) and
   one reconcile (with 1% in the window, half of them matched by a deploy signal): the number
   of SQL statements and the wall time of each (target: a constant number, under 1 s).
"""

from __future__ import annotations

import argparse
import threading
import time

from redis import Redis
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from bot.app.reconcile import run_reconcile
from bot.app.sweep import run_sweep
from bot.config import Settings
from bot.core.states import BindingState, Step
from bot.services import Services
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from bot.store.models import utcnow
from bot.store.signals import record_signal
from bot.store.writeguard import state_writes
from jobs.queue import RQWorkQueue
from tests.bench.seed import seed

SCHEMA = "gitops_bench_workflow"


class Statements:
    """Counts SQL statements sent on an engine."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *args: object) -> None:
        self.count += 1


def fresh_engine(url: str) -> Engine:
    """An engine on an empty schema of its own, migrated."""
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    admin.dispose()
    engine = make_engine(f"{url}?options=-csearch_path%3D{SCHEMA}")
    upgrade(engine)
    return engine


def waiting(engine: Engine, redis: Redis, n: int) -> dict[str, float]:
    """Part 1: n operations waiting on pipelines."""
    queue = RQWorkQueue(redis)
    redis.flushdb()
    before_mem = int(redis.info("memory")["used_memory"])
    threads_before = threading.active_count()
    now = utcnow()
    started = time.perf_counter()
    ids = seed(
        engine,
        n,
        BindingState.MR_CREATING,
        Step.CREATE_SUCCEEDED,
        now,
        deadline_in=700,
        prefix="wait",
    )
    for op_id in ids:
        queue.enqueue_in(30, "jobs.drive.drive", op_id, 2, job_id=f"later:{op_id}")
    seconds = time.perf_counter() - started
    used = int(redis.info("memory")["used_memory"]) - before_mem
    print(
        f"{n} operations waiting on pipelines (rows + delayed poll jobs), set up in {seconds:.1f} s"
    )
    print(f"  threads in this process: {threads_before} before, {threading.active_count()} after")
    print(f"  Redis memory for {n} delayed polls: {used / 1e6:.1f} MB ({used / n:.0f} bytes each)")
    print(f"  delayed jobs in Redis: {queue.queue.scheduled_job_registry.count}")
    return {
        "waiting": float(n),
        "threads_before": float(threads_before),
        "threads_after": float(threading.active_count()),
        "redis_bytes": float(used),
        "delayed_jobs": float(queue.queue.scheduled_job_registry.count),
    }


def constant_queries(engine: Engine, redis: Redis, rows: int) -> dict[str, float]:
    """Part 2: sweep and reconcile over `rows` operations."""
    now = utcnow()
    overdue = rows // 100
    window = rows // 100
    seed(
        engine,
        rows - overdue - window,
        BindingState.VALIDATED,
        Step.CALLBACK_VALIDATED,
        now,
        prefix="done",
    )
    seed(
        engine,
        overdue,
        BindingState.MERGING,
        Step.HANDLE_STARTED,
        now,
        deadline_in=-60,
        prefix="late",
    )
    merged = seed(
        engine,
        window,
        BindingState.MERGED,
        Step.HANDLE_MERGED,
        now,
        merged_ago=600,
        prefix="merged",
    )
    for op_id in merged[: window // 2]:
        record_signal(
            engine,
            source="callback",
            project_id="platform/config",
            status="success",
            operation_id=op_id,
        )
    with engine.begin() as conn:
        total = conn.execute(text("SELECT count(*) FROM operations")).scalar_one()
    settings = Settings(database_url=str(engine.url), step_timeout=600)
    services = Services(settings=settings, engine=engine, queue=RQWorkQueue(redis), redis=redis)
    counter = Statements(engine)
    redis.flushdb()
    figures: dict[str, float] = {"rows": float(total)}
    for label, run in (
        ("sweep", lambda: run_sweep(services, now)),
        (
            "reconcile (dry run)",
            lambda: run_reconcile(engine, now, min_age=120, max_age=86400, dry_run=True),
        ),
    ):
        counter.count = 0
        started = time.perf_counter()
        report = run()
        seconds = time.perf_counter() - started
        key = label.split()[0] + ("_dry" if "dry" in label else "")
        figures[f"{key}_statements"] = float(counter.count)
        figures[f"{key}_ms"] = seconds * 1000
        print(
            f"{label} over {total} operations: {counter.count} SQL statements, "
            f"{seconds * 1000:.0f} ms  ({summary(report)})"
        )
    counter.count = 0
    started = time.perf_counter()
    report = run_reconcile(engine, now, min_age=120, max_age=86400)
    seconds = time.perf_counter() - started
    print(
        f"reconcile over {total} operations, validating {len(report.validated)}: "
        f"{counter.count} SQL statements (2 to find them, the rest one validation each), "
        f"{seconds * 1000:.0f} ms"
    )
    figures["reconcile_validated"] = float(len(report.validated))
    figures["reconcile_statements"] = float(counter.count)
    figures["reconcile_ms"] = seconds * 1000
    return figures


def summary(report: object) -> str:
    """A report's lists as counts."""
    fields = vars(report)
    return ", ".join(f"{k} {len(v) if isinstance(v, list) else v}" for k, v in fields.items())


def measure(
    url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    redis_url: str = "redis://127.0.0.1:6379/12",
    waiting_n: int = 10_000,
    rows: int = 100_000,
) -> dict[str, float]:
    """Part 1 and part 2 together."""
    engine = fresh_engine(url)
    redis = Redis.from_url(redis_url)
    try:
        figures = waiting(engine, redis, waiting_n)
        # emptying the state tables goes through the door fire() uses (the triggers refuse it
        # otherwise: migration 0006)
        with engine.begin() as conn, state_writes(conn):
            conn.execute(text("TRUNCATE operations, bindings, deploy_signals, audit_log, outbox"))
        figures.update(constant_queries(engine, redis, rows))
        return figures
    finally:
        redis.flushdb()
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    measure(args.url, args.redis, args.waiting, args.rows)


if __name__ == "__main__":
    main()
