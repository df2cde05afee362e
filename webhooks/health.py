"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from bot import metrics
from bot.store.models import OutboxEntry
from webhooks.context import services_of

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """The process is up."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """The database answers (and Redis, once the queue is wired)."""
    try:
        with services_of().engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return jsonify(status="unavailable", database=type(exc).__name__), 503
    return jsonify(status="ready", database="ok"), 200


@bp.get("/metrics")
def prometheus() -> Response:
    """Prometheus text format; the outbox gauge is read from the database at scrape time."""
    try:
        with services_of().engine.connect() as conn:
            pending = conn.execute(
                select(func.count()).select_from(OutboxEntry).where(OutboxEntry.sent_at.is_(None))
            ).scalar_one()
        metrics.OUTBOX_PENDING.set(pending)
    except SQLAlchemyError:
        pass
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)
