"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from bot import metrics
from bot.store.health import backlog, database_ready
from webhooks.context import services_of
from webhooks.metrics import INBOX_BACKLOG

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """The process is up."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Ready when the database answers and Redis answers (or the queue is the in-process one)."""
    services = services_of()
    report: dict[str, str] = {"database": database_ready(services.engine)}
    if services.settings.redis_url is None:
        report["queue"] = "embedded"
    else:
        try:
            services.redis.ping()
            report["queue"] = "ok"
        except (RedisError, AttributeError) as exc:
            report["queue"] = type(exc).__name__
    ready = report["database"] == "ok" and report["queue"] in ("ok", "embedded")
    return jsonify(status="ready" if ready else "unavailable", **report), 200 if ready else 503


@bp.get("/metrics")
def prometheus() -> Response:
    """Prometheus text format; the outbox and inbox gauges are read at scrape time."""
    counts = backlog(services_of().engine)
    if counts is not None:  # else the scrape still answers with the counters it has
        pending, waiting = counts
        metrics.OUTBOX_PENDING.set(pending)
        INBOX_BACKLOG.set(waiting)
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)
