"""POST /webhooks/approval: HMAC signature and timestamp window, dedupe on request_id."""

from __future__ import annotations

import time

from flask import Blueprint, Response, request

from bot.approval import SIGNATURE_HEADER, TIMESTAMP_HEADER, parse_callback, verify_signature
from bot.approval.errors import MalformedCallback, SignatureRejected
from bot.ingress.inbox import Delivery, body_key, kept_headers
from webhooks.context import services_of
from webhooks.ingest import accept, read_body, refuse

bp = Blueprint("approval_hook", __name__)

SOURCE = "approval"
EVENT = "approval_callback"


@bp.post("/webhooks/approval")
def receive() -> Response:
    """Verify the signature, store the callback once per request_id, enqueue, answer."""
    started = time.perf_counter()
    body = read_body()
    try:
        verify_signature(
            services_of().settings.approval_secret,
            request.headers.get(TIMESTAMP_HEADER),
            body,
            request.headers.get(SIGNATURE_HEADER),
            now=time.time(),
        )
    except SignatureRejected as exc:
        return refuse(SOURCE, "unauthorized", started, 401, f"signature {exc.reason}")
    headers = kept_headers(request.headers)
    try:
        callback = parse_callback(body)
    except MalformedCallback as exc:
        key = body_key(SOURCE, EVENT, body)
        delivery = Delivery(SOURCE, key, EVENT, body, headers, "quarantined", str(exc))
        return accept(delivery, started)
    return accept(
        Delivery(SOURCE, f"{SOURCE}:{callback.request_id}", EVENT, body, headers), started
    )
