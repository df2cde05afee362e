"""The one ingest path every webhook shares: store in the inbox, enqueue, answer 2xx fast.

No GitLab call and no long work here. Redis down: the row is stored and the sweep enqueues it.
Database down: the delivery waits in a Redis list. Both down: 503, logged loudly.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, current_app, jsonify, request
from redis.exceptions import RedisError
from werkzeug.exceptions import RequestEntityTooLarge

from bot.ingress import inbox
from bot.ingress.group import GroupCommit
from bot.ingress.inbox import Delivery
from bot.store.inbox import StoreError
from webhooks.context import services_of
from webhooks.metrics import ACK_SECONDS, DELIVERIES

log = logging.getLogger(__name__)


def read_body(limit: int | None = None) -> bytes:
    """The request body, never more than `limit` bytes (GITOPS_MAX_BODY_BYTES by default;
    413 past it).

    A declared Content-Length over the limit is refused by werkzeug before reading; a body
    without one (chunked) is read from the server's stream to one byte past the limit
    (werkzeug's own reader stops at the limit without noticing that more was sent). The
    whole body must arrive within GITOPS_BODY_TIMEOUT seconds (408 past it, nothing stored).
    Webhooks and the REST API both read their bodies here.
    """
    from webhooks.body import body_deadline

    if limit is None:
        limit = services_of().settings.max_body_bytes
    request.max_content_length = limit  # werkzeug's check of a declared Content-Length
    with body_deadline():
        if request.content_length is not None or "wsgi.input" not in request.environ:
            return request.get_data(cache=False)
        data: bytes = request.environ["wsgi.input"].read(limit + 1)
    if len(data) > limit:
        raise RequestEntityTooLarge()
    return data


def answer(source: str, outcome: str, started: float, status: int = 200) -> Response:
    """A small JSON answer, counted and timed."""
    DELIVERIES.labels(source, outcome).inc()
    ACK_SECONDS.labels(source).observe(time.perf_counter() - started)
    response = jsonify(status=outcome)
    response.status_code = status
    return response


def refuse(source: str, outcome: str, started: float, status: int, detail: str) -> Response:
    """A JSON refusal ({error, detail}), counted and timed."""
    DELIVERIES.labels(source, outcome).inc()
    ACK_SECONDS.labels(source).observe(time.perf_counter() - started)
    response = jsonify(error=outcome, detail=detail)
    response.status_code = status
    return response


def accept(delivery: Delivery, started: float) -> Response:
    """Stores the delivery (or keeps it in Redis), enqueues its processing, answers 2xx.

    Deliveries arriving together in this process share one commit and one job (group commit,
    bot/ingress/group.py); each is answered only once its own row is committed.
    """
    services = services_of()
    extra = {"correlation_id": delivery.delivery_key, "source": delivery.source}
    try:
        acked = group_of().submit(delivery)
    except StoreError as db_error:
        try:
            inbox.push_fallback(services.redis, delivery)
        except (RedisError, AttributeError) as redis_error:
            log.critical(
                "delivery lost: database (%s) and Redis (%s) are both down",
                type(db_error).__name__,
                type(redis_error).__name__,
                extra=extra,
            )
            return refuse(delivery.source, "unavailable", started, 503, "try again later")
        log.warning("database down: delivery kept in Redis until it is back", extra=extra)
        return answer(delivery.source, "fallback", started, 202)
    if acked.stored.duplicate:
        return answer(delivery.source, "duplicate", started)
    if delivery.status != "received":
        log.warning("delivery quarantined: %s", delivery.reason, extra=extra)
        return answer(delivery.source, "quarantined", started)
    if not acked.enqueued:
        log.warning("queue down: the sweep will enqueue this delivery", extra=extra)
    return answer(delivery.source, "accepted", started, 202)


def group_of(app: Flask | None = None) -> GroupCommit:
    """The app's group commit (one per process: the web workers' threads share it)."""
    group = (app or current_app).extensions["gitops_ingest"]
    assert isinstance(group, GroupCommit)
    return group


def init_app(app: Flask) -> None:
    """Gives the app its group commit, reading the services at each flush (tests swap them)."""
    app.extensions["gitops_ingest"] = GroupCommit(
        lambda: services_of(app).engine, lambda: services_of(app).queue
    )
