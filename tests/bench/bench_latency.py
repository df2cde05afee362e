"""Event to next action through the queue: a webhook answered by gunicorn, processed by an RQ
worker process, until the transition it causes is committed.

Usage: .venv/bin/python -m tests.bench.bench_latency [--url URL] [--redis URL] [--events 200]

Operations wait in APPROVAL_SENT; each gets its approval callback over HTTP (one every
`--every` seconds, to `--workers` worker processes);
the latency of an event is the time from sending it to the commit of its APPROVED transition
(the audit row's timestamp, same machine clock). Target: median < 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FailedJobRegistry
from sqlalchemy import select, text

from bot.approval import sign
from bot.core.states import BindingState, Flow, Step
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from bot.store.models import AUDIT, utcnow
from jobs.connection import QUEUE_NAME
from tests.bench.bench_ingress import gunicorn
from tests.bench.seed import seed
from tests.ports import free_port

SCHEMA = "gitops_bench_latency"
SECRET = "bench-approval-secret"


def measure(
    url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    redis_url: str = "redis://127.0.0.1:6379/12",
    events: int = 200,
    every: float = 0.1,
    workers: int = 2,
) -> dict[str, Any]:
    """Latencies (ms) from an event sent to its transition committed, and where any event
    that did not move stopped (answer codes, inbox statuses, failed jobs, workers alive)."""
    args = argparse.Namespace(url=url, redis=redis_url, events=events, every=every, workers=workers)
    admin = make_engine(args.url)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    db_url = f"{args.url}?options=-csearch_path%3D{SCHEMA}"
    engine = make_engine(db_url)
    upgrade(engine)
    Redis.from_url(args.redis).flushdb()
    ops = seed(
        engine,
        args.events,
        BindingState.APPROVAL_SENT,
        Step.APPROVAL_SUBMITTED,
        utcnow(),
        deadline_in=3600,
        flow=Flow.APPROVE_FIRST,
        prefix="lat",
    )
    env = {
        "GITOPS_DATABASE_URL": db_url,
        "GITOPS_REDIS_URL": args.redis,
        "GITOPS_APPROVAL_SECRET": SECRET,
        "GITOPS_WEBHOOK_SECRET": "x",
        "GITOPS_GITLAB_URL": f"http://127.0.0.1:{free_port()}",
    }  # nothing listens: no GitLab
    procs = [
        subprocess.Popen(
            [str(Path(sys.executable).with_name("gitops-bot")), "worker"],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(args.workers)
    ]
    sent: dict[str, datetime] = {}
    answers: dict[int, int] = {}
    left: dict[str, Any] = {}
    try:
        with gunicorn("gitops_bot.wsgi:create_app()", env) as port, requests.Session() as http:
            ready = time.monotonic() + 60  # the worker registers itself in Redis when it is up
            redis = Redis.from_url(args.redis)
            while len(redis.smembers("rq:workers")) < args.workers and time.monotonic() < ready:
                time.sleep(0.1)
            for n, op_id in enumerate(ops):
                body = json.dumps(
                    {
                        "request_id": f"r{n}",
                        "operation_id": op_id,
                        "approval_id": f"a{n}",
                        "decision": "approved",
                        "ext": {},
                    }
                ).encode()
                stamp = str(int(time.time()))
                sent[op_id] = datetime.now(UTC)
                response = http.post(
                    f"http://127.0.0.1:{port}/webhooks/approval",
                    data=body,
                    timeout=10,
                    headers={
                        "X-Approval-Timestamp": stamp,
                        "X-Approval-Signature": sign(SECRET, stamp, body),
                    },
                )
                answers[response.status_code] = answers.get(response.status_code, 0) + 1
                time.sleep(args.every)
            deadline = time.monotonic() + 60
            done: dict[str, datetime] = {}
            while time.monotonic() < deadline and len(done) < len(ops):
                with engine.connect() as conn:
                    done = dict(
                        conn.execute(
                            select(AUDIT.c.operation_id, AUDIT.c.created_at).where(
                                AUDIT.c.event == "approved", AUDIT.c.version > 0
                            )
                        ).all()
                    )
                time.sleep(0.5)
            with engine.connect() as conn:
                stored = {
                    json.loads(bytes(body))["operation_id"]: at
                    for body, at in conn.execute(text("SELECT body, received_at FROM inbox")).all()
                }
                left["inbox"] = dict(
                    conn.execute(text("SELECT status, count(*) FROM inbox GROUP BY status")).all()
                )
            left.update(what_was_left(redis, procs))
    finally:
        for worker in procs:
            worker.terminate()
        for worker in procs:
            worker.wait(timeout=30)
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
        Redis.from_url(args.redis).flushdb()
    latencies = sorted((done[op] - sent[op]).total_seconds() * 1000 for op in done)
    queued = sorted((done[op] - stored[op]).total_seconds() * 1000 for op in done if op in stored)
    return {
        **left,
        "answers": answers,
        "events": float(len(ops)),
        "moved": float(len(latencies)),
        "median_ms": statistics.median(latencies),
        "p90_ms": latencies[int(len(latencies) * 0.9) - 1],
        "max_ms": latencies[-1],
        "queued_median_ms": statistics.median(queued),
        "workers": float(args.workers),
        "every_s": every,
    }


def what_was_left(redis: Redis, workers: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """Jobs still queued or failed (with the first failure's last line), workers still alive."""
    queue = Queue(QUEUE_NAME, connection=redis)
    failed = FailedJobRegistry(queue=queue)
    first = ""
    for job_id in failed.get_job_ids()[:1]:
        job = Job.fetch(job_id, connection=redis)
        first = (job.exc_info or "").strip().splitlines()[-1:][0] if job.exc_info else ""
    return {
        "queued": queue.count,
        "failed": failed.count,
        "first_failure": first,
        "workers_alive": sum(worker.poll() is None for worker in workers),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between events")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    f = measure(args.url, args.redis, args.events, args.every, args.workers)
    print(
        f"{f['moved']:.0f} of {f['events']:.0f} events moved their operation; event -> "
        f"committed transition: median {f['median_ms']:.1f} ms, p90 {f['p90_ms']:.1f} ms, "
        f"max {f['max_ms']:.1f} ms (target median < 50 ms); stored -> committed median "
        f"{f['queued_median_ms']:.1f} ms"
    )
    print(
        f"answers {f['answers']}; inbox {f['inbox']}; jobs queued {f['queued']}, failed "
        f"{f['failed']} {f['first_failure']}; workers alive {f['workers_alive']}/{args.workers}"
    )


if __name__ == "__main__":
    main()
