"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError
from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from bot import metrics
from bot.store.models import INBOX, OUTBOX
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
    report: dict[str, str] = {}
    try:
        with services.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        report["database"] = "ok"
    except SQLAlchemyError as exc:
        report["database"] = type(exc).__name__
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
    try:
        with services_of().engine.connect() as conn:
            pending = conn.execute(
                select(func.count()).select_from(OUTBOX).where(OUTBOX.c.sent_at.is_(None))
            ).scalar_one()
            backlog = conn.execute(
                select(func.count()).select_from(INBOX).where(INBOX.c.status == "received")
            ).scalar_one()
        metrics.OUTBOX_PENDING.set(pending)
        INBOX_BACKLOG.set(backlog)
    except SQLAlchemyError:
        pass  # the scrape still answers with the counters it has
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)
