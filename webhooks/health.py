"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from bot.app.gauges import exposition
from bot.store.health import database_ready
from webhooks.context import services_of

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
    """Prometheus text format: this process's counters, then the gauges of the database's state
    read now (bot/app/gauges.py; left out when the database fails)."""
    body = generate_latest() + exposition(services_of().engine)
    return Response(body, mimetype=CONTENT_TYPE_LATEST)
