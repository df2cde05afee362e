"""Access to the process's services from inside a request."""

from __future__ import annotations

from flask import Flask, current_app

from bot.services import Services


def services_of(app: Flask | None = None) -> Services:
    """The services the (current) app was built with."""
    services = (app or current_app).extensions["gitops"]
    assert isinstance(services, Services)
    return services
