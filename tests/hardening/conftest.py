"""The ingress tests' app, client and services serve the hardening tests too."""

from __future__ import annotations

from tests.ingress.conftest import app, client, services

__all__ = ["app", "client", "services"]

from tests.workflow.conftest import bot, redis

__all__ += ["bot", "redis"]
