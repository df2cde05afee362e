"""The web app as gunicorn loads it (the Procfile's `web`): `gitops_bot.wsgi:create_app()`.

A zero-argument factory in the composition root: it reads the settings from the environment and
builds the services once per gunicorn worker process, then hands them to `webhooks.create_app`.
"""

from __future__ import annotations

from flask import Flask

import webhooks
from bot.config import Settings
from gitops_bot.wiring import build_services


def create_app() -> Flask:
    """The web app on services built from GITOPS_* (read once, here)."""
    return webhooks.create_app(build_services(Settings.from_env()))
