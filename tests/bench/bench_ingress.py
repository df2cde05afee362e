"""Webhook acks: the bot's /webhooks/gitlab beside a bare `{}` endpoint, same gunicorn config.

Usage: .venv/bin/python -m tests.bench.bench_ingress [--url URL] [--redis URL] [--seconds 10]

Both apps run under `gunicorn --config python:webhooks.gunicorn_conf` (the production config)
on this machine; the bot on PostgreSQL and Redis, each delivery a new Idempotency-Key (so each
is stored and enqueued). Prints:
- throughput of each under the same closed-loop load (wrk when installed, else Python threads)
  and the ratio bot/bare (target >= 0.5);
- ack latency p50/p99/max at a paced 250 requests/s for `--seconds` (target p99 < 50 ms, no
  response over 1 s, no non-2xx).
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from redis import Redis
from sqlalchemy import text

from bot.store.engine import make_engine

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "merge_request.json"
SECRET = "bench-secret"
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/12"
SCHEMA = "gitops_bench_ingress"
HEADERS = {
    "X-Gitlab-Event": "Merge Request Hook",
    "X-Gitlab-Token": SECRET,
    "Content-Type": "application/json",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def gunicorn(app: str, env: dict[str, str]) -> Iterator[int]:
    """Runs gunicorn with the production config on a free port until the block ends."""
    port = free_port()
    full_env = {**os.environ, **env, "PORT": str(port), "GITOPS_BIND": "127.0.0.1"}
    exe = str(Path(sys.executable).with_name("gunicorn"))
    proc = subprocess.Popen(
        [exe, "--config", "python:webhooks.gunicorn_conf", app],
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError(f"{app} did not start: {proc.stderr.read() if proc.stderr else ''}")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wrk_rate(port: int, body: Path, seconds: int) -> tuple[float, int]:
    """Requests/s and non-2xx count from wrk (2 threads, 32 connections)."""
    script = Path(tempfile.mkstemp(suffix=".lua")[1])
    script.write_text(f"""
local f = io.open("{body}", "rb"); local body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.body = body
wrk.headers["X-Gitlab-Event"] = "Merge Request Hook"
wrk.headers["X-Gitlab-Token"] = "{SECRET}"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  wrk.headers["Idempotency-Key"] = string.format("%d-%d-%d", os.time(), math.random(1e9), n)
  return wrk.format(nil, "/webhooks/gitlab")
end
""")
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", str(script), f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        check=True,
    )
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out.stdout).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out.stdout)
    return rate, int(bad.group(1)) if bad else 0


def python_rate(port: int, body: bytes, seconds: int) -> tuple[float, int]:
    """Closed-loop load from 16 keep-alive connections in threads."""
    done, bad = [0], [0]
    stop = time.monotonic() + seconds

    def loop() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while time.monotonic() < stop:
            conn.request(
                "POST", "/webhooks/gitlab", body, {**HEADERS, "Idempotency-Key": uuid.uuid4().hex}
            )
            response = conn.getresponse()
            response.read()
            done[0] += 1
            bad[0] += response.status >= 300

    threads = [threading.Thread(target=loop) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / seconds, bad[0]


def paced(port: int, body: bytes, rate: int, seconds: int) -> tuple[list[float], int]:
    """Latencies (s) of requests sent at a fixed rate from 10 keep-alive connections."""
    latencies: list[float] = []
    bad = [0]
    lock = threading.Lock()
    workers = 10
    per_worker = rate / workers
    start = time.monotonic() + 0.5

    def loop(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        n = 0
        while True:
            due = start + (n + index / workers) / per_worker
            if due - start > seconds:
                return
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            began = time.monotonic()
            conn.request(
                "POST", "/webhooks/gitlab", body, {**HEADERS, "Idempotency-Key": uuid.uuid4().hex}
            )
            response = conn.getresponse()
            response.read()
            took = time.monotonic() - began
            with lock:
                latencies.append(took)
                bad[0] += response.status >= 300
            n += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, bad[0]


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1] if len(values) > 1 else 0.0


def measure(
    url: str = DEFAULT_URL, redis_url: str = DEFAULT_REDIS, seconds: int = 10, rate: int = 250
) -> dict[str, Any]:
    """Throughput and paced latency of the bare endpoint and the bot, same gunicorn config."""
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    Redis.from_url(redis_url).flushdb()
    env = {
        "GITOPS_DATABASE_URL": f"{url}?options=-csearch_path%3D{SCHEMA}",
        "GITOPS_REDIS_URL": redis_url,
        "GITOPS_WEBHOOK_SECRET": SECRET,
    }
    body = FIXTURE.read_bytes()
    use_wrk = shutil.which("wrk") is not None
    figures: dict[str, Any] = {
        "load": "wrk -t2 -c32" if use_wrk else "python, 16 connections",
        "seconds": seconds,
        "rate": rate,
    }
    try:
        for name, app in (
            ("bare", "tests.bench.bare_app:create_app()"),
            ("bot", "webhooks:create_app()"),
        ):
            with gunicorn(app, env) as port:
                throughput, bad = (
                    wrk_rate(port, FIXTURE, seconds)
                    if use_wrk
                    else python_rate(port, body, seconds)
                )
                latencies, paced_bad = paced(port, body, rate, seconds)
            figures[name] = {
                "throughput": throughput,
                "non_2xx": bad + paced_bad,
                "p50_ms": quantile(latencies, 0.5) * 1000,
                "p99_ms": quantile(latencies, 0.99) * 1000,
                "max_ms": max(latencies) * 1000,
                "requests": len(latencies),
            }
    finally:
        with admin.begin() as conn:
            figures["stored"] = conn.execute(
                text(f"SELECT count(*) FROM {SCHEMA}.inbox")
            ).scalar_one()
            conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
        admin.dispose()
        Redis.from_url(redis_url).flushdb()
    figures["ratio"] = figures["bot"]["throughput"] / figures["bare"]["throughput"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", type=int, default=250)
    args = parser.parse_args()
    figures = measure(args.url, args.redis, args.seconds, args.rate)
    from webhooks import gunicorn_conf as conf

    print(
        f"gunicorn: {conf.workers} workers x {conf.threads} threads ({conf.worker_class}); "
        f"load: {figures['load']}, {args.seconds} s"
    )
    for name in ("bare", "bot"):
        f = figures[name]
        print(
            f"{name:5} throughput {f['throughput']:8.0f} req/s; at {args.rate} req/s: "
            f"p50 {f['p50_ms']:5.1f} ms, p99 {f['p99_ms']:5.1f} ms, max {f['max_ms']:6.1f} ms, "
            f"non-2xx {f['non_2xx']}, {f['requests']} requests"
        )
    print(f"throughput ratio bot/bare = {figures['ratio']:.2f}   (target >= 0.5)")
    print(f"deliveries stored by the bot: {figures['stored']}")


if __name__ == "__main__":
    main()
