"""Starts the processes: gunicorn for web, the embedded one-process default, the worker and the
scheduler. Each builds its services once (gitops_bot/wiring.py) and hands them down."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from bot.config import Settings
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from gitops_bot.ops_clients import warn_if_shared_token
from gitops_bot.wiring import build_services
from webhooks import create_app

log = logging.getLogger(__name__)


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    """Gunicorn driven from code, loading the Flask app factory in each worker."""

    def __init__(self, settings: Settings, options: dict[str, Any], embedded: bool = False) -> None:
        self._settings = settings
        self._options = options
        self._embedded = embedded
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        services = build_services(self._settings)
        if self._embedded:
            # one process does everything: the worker thread and the app share the services
            from gitops_bot.embedded import EmbeddedRuntime

            EmbeddedRuntime(services).start()
        return create_app(services)


#: The startup warning when GITOPS_PROJECTS is unset (no allow-list of managed projects).
UNSCOPED_WARNING = (
    "GITOPS_PROJECTS is not set: every project that sends a webhook or is named in a request "
    "is managed; set it to the comma-separated projects the bot may act on"
)


def warn_if_unscoped(settings: Settings) -> bool:
    """Logs UNSCOPED_WARNING once when GITOPS_PROJECTS is unset; True when it did."""
    if settings.projects:
        return False
    log.warning(UNSCOPED_WARNING)
    return True


def _upgrade_schema(settings: Settings) -> None:
    engine = make_engine(settings.database_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def _options(host: str, port: int, **extra: Any) -> dict[str, Any]:
    from webhooks import gunicorn_conf as conf

    return {
        "bind": f"{host}:{port}",
        "worker_class": conf.worker_class,
        "timeout": conf.timeout,
        "graceful_timeout": conf.graceful_timeout,
        "keepalive": conf.keepalive,
        "limit_request_line": conf.limit_request_line,
        "limit_request_fields": conf.limit_request_fields,
        "limit_request_field_size": conf.limit_request_field_size,
        "errorlog": "-",
        "logger_class": conf.logger_class,
        **extra,
    }


def web(settings: Settings, *, host: str, port: int) -> None:
    """The web process: schema upgraded, then gunicorn with the production settings."""
    from webhooks import gunicorn_conf as conf

    warn_if_unscoped(settings)
    warn_if_shared_token(settings)
    _upgrade_schema(settings)
    _Gunicorn(settings, _options(host, port, workers=conf.workers, threads=conf.threads)).run()


def serve(settings: Settings, *, host: str, port: int) -> None:
    """The embedded default: one process, SQLite, the in-process queue, schema upgraded first."""
    warn_if_unscoped(settings)
    warn_if_shared_token(settings)
    _upgrade_schema(settings)
    _Gunicorn(settings, _options(host, port, workers=1, threads=8), embedded=True).run()


def worker(settings: Settings, *, burst: bool = False) -> bool:
    """An RQ worker on the bot's queue, running delayed jobs through RQ's own scheduler; its jobs
    run on the services built here, once."""
    from jobs.worker import ServicesWorker

    if not settings.redis_url:
        raise SystemExit(
            "gitops-bot worker needs GITOPS_REDIS_URL; on the embedded default "
            "`gitops-bot serve` runs the worker in-process"
        )
    warn_if_unscoped(settings)
    if settings.worker_metrics_port is not None:
        serve_metrics(settings.worker_metrics_port)
    worker = ServicesWorker(build_services(settings))
    # RQ sets its loggers' level itself (INFO unless told): GITOPS_RQ_LOG_LEVEL tells it; the
    # root handler bot/logs.py installed keeps it from adding handlers of its own
    level = settings.logs.rq_level
    return bool(worker.work(with_scheduler=True, burst=burst, logging_level=level))


def serve_metrics(port: int, addr: str = "0.0.0.0") -> Callable[[], None]:
    """Answers GET /metrics on `port` from a thread of this process, with what the process
    counts (the database's gauges are the web's: every process would answer the same); the
    function that stops it. The worker's steps and deliveries are counted here, not in the web."""
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=addr)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop


def scheduler(settings: Settings) -> None:
    """rq-scheduler, which enqueues the periodic jobs (sweep, outbox, reconcile, hooks); it runs
    none itself, so of its services it uses the Redis connection."""
    from rq_scheduler import Scheduler

    from jobs.connection import QUEUE_NAME

    if not settings.redis_url:
        raise SystemExit(
            "gitops-bot scheduler needs GITOPS_REDIS_URL; on the embedded default "
            "`gitops-bot serve` runs the periodic jobs in-process"
        )
    from jobs.schedule import periodic_jobs, register

    ids = [job.id for job in periodic_jobs(settings)]

    class SelfHealingScheduler(Scheduler):  # type: ignore[misc]
        """rq-scheduler that registers the periodic jobs again when Redis lost them.

        rq-scheduler keeps them only in Redis: after a FLUSHALL (or a failover to an empty
        replica) no sweep would ever run again, and nothing lost with Redis would be found.
        One ZSCORE per periodic job per loop (every second) tells.
        """

        def enqueue_jobs(self) -> Any:
            if any(job_id not in self for job_id in ids):
                log.warning("periodic jobs missing from Redis; registering them again")
                register(self, settings)
            return super().enqueue_jobs()

    services = build_services(settings)
    scheduler = SelfHealingScheduler(queue_name=QUEUE_NAME, connection=services.redis, interval=1)
    register(scheduler, settings)
    scheduler.run()
