"""The reference for bench_ingress: an endpoint that answers `{}` and does nothing else."""

from __future__ import annotations

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue


def create_app() -> Flask:
    """A Flask app with the same routes the benchmark hits, doing no work."""
    app = Flask(__name__)

    @app.post("/webhooks/gitlab")
    def hook() -> ResponseReturnValue:
        return jsonify({})

    @app.get("/healthz")
    def healthz() -> ResponseReturnValue:
        return jsonify(status="ok")

    return app
