"""The Flask app factory and its blueprints (gitlab, approval, deploy, api, pages, signin,
health)."""

from __future__ import annotations

from flask import Flask

from bot.services import Services


def create_app(services: Services) -> Flask:
    """Builds the web app on the process's services (the composition root, gitops_bot, builds
    them: `gitops_bot.wsgi:create_app()` for gunicorn, `gitops-bot web` and `serve`)."""
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = services.settings.max_body_bytes
    app.extensions["gitops"] = services

    from webhooks import api, approval, deploy, errors, gitlab, health, ingest, pages, signin

    errors.init_app(app)
    ingest.init_app(app)
    app.register_blueprint(health.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(gitlab.bp)
    app.register_blueprint(approval.bp)
    app.register_blueprint(deploy.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(signin.bp)
    return app
