"""HTTP errors as JSON `{error, detail}`; a bad request is never answered with a 500."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from webhooks.metrics import DELIVERIES

log = logging.getLogger(__name__)

_SOURCES = {
    "/webhooks/gitlab": "gitlab",
    "/webhooks/approval": "approval",
    "/webhooks/deploy": "deploy",
}


def init_app(app: Flask) -> None:
    """Registers the JSON error handlers."""

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        from flask import request

        status = exc.code or 500
        if status == 413 and request.path in _SOURCES:
            DELIVERIES.labels(_SOURCES[request.path], "too_large").inc()
        name = (exc.name or "error").lower().replace(" ", "_")
        response = jsonify(error=name, detail=exc.description)
        # the exception's own headers: a 405's Allow (RFC 9110 15.5.6), a 401's WWW-Authenticate
        for header, value in exc.get_headers():
            if header.lower() != "content-type":
                response.headers[header] = value
        return response, status
