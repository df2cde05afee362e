"""The Flask app factory and its blueprints (gitlab, approval, deploy, api, pages, health)."""

from __future__ import annotations

from flask import Flask

from bot.config import Settings
from bot.services import Services, build_services


def create_app(settings: Settings | None = None, services: Services | None = None) -> Flask:
    """Builds the web app; settings come from the environment when not given."""
    if services is None:
        services = build_services(settings or Settings.from_env())
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = services.settings.max_body_bytes
    app.extensions["gitops"] = services

    from webhooks import health

    app.register_blueprint(health.bp)
    return app
