"""POST /webhooks/gitlab: X-Gitlab-Token checked in constant time, then the shared ingest."""

from __future__ import annotations

import hmac
import time
import uuid

from flask import Blueprint, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from bot.ingress import gitlab_events
from bot.ingress.inbox import Delivery, body_key, kept_headers
from bot.ingress.jsonload import Unusable, load_object
from webhooks.context import services_of
from webhooks.ingest import accept, answer, read_body, refuse
from webhooks.metrics import DELIVERIES

bp = Blueprint("gitlab_hook", __name__)

SOURCE = "gitlab"


def token_ok(given: str | None, secret: str) -> bool:
    """Constant-time comparison; an unset secret refuses everything (fail closed)."""
    if not secret or given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode("utf-8"))


@bp.post("/webhooks/gitlab")
def receive() -> Response:
    """Verify, store, enqueue, answer: GitLab gives a hook 10 s and disables it after 4 failures."""
    started = time.perf_counter()
    settings = services_of().settings
    if not token_ok(request.headers.get("X-Gitlab-Token"), settings.webhook_secret):
        return refuse(SOURCE, "unauthorized", started, 401, "wrong or missing X-Gitlab-Token")
    event_type = request.headers.get("X-Gitlab-Event", "")
    if event_type not in gitlab_events.HANDLED:
        return answer(SOURCE, "ignored", started)
    headers = kept_headers(request.headers)
    key = request.headers.get("Idempotency-Key")
    try:
        body = read_body(settings.webhook_max_body_bytes)
    except RequestEntityTooLarge:
        # authenticated: never a 4xx (GitLab disables a hook after four); kept without its
        # body, quarantined with the reason, counted and shown by doctor and the dashboard
        DELIVERIES.labels(SOURCE, "too_large").inc()
        size = request.content_length
        limit = settings.webhook_max_body_bytes
        reason = f"body {f'of {size} bytes ' if size is not None else ''}over"
        reason += f" GITOPS_WEBHOOK_MAX_BODY_BYTES ({limit}): not read, nothing processed"
        kept = key or request.headers.get("X-Gitlab-Event-UUID") or uuid.uuid4().hex
        delivery_key = f"{SOURCE}:{kept}"
        return accept(
            Delivery(SOURCE, delivery_key, event_type, b"", headers, "quarantined", reason),
            started,
        )
    delivery_key = f"{SOURCE}:{key}" if key else body_key(SOURCE, event_type, body)
    try:
        gitlab_events.parse(event_type, load_object(body))
    except Unusable as exc:
        return accept(
            Delivery(SOURCE, delivery_key, event_type, body, headers, "quarantined", str(exc)),
            started,
        )
    return accept(Delivery(SOURCE, delivery_key, event_type, body, headers), started)
