"""The services a worker process's jobs run on: built once per process, or set by the embedded
runner and by tests. Job functions take ids and plain values and ask for services here."""

from __future__ import annotations

from bot.config import Settings
from bot.services import Services

_services: Services | None = None


def use(services: Services | None) -> None:
    """Sets (or clears) the services jobs in this process use."""
    global _services
    _services = services


def services() -> Services:
    """This process's services, built from the environment on first use."""
    global _services
    if _services is None:
        from gitops_bot.wiring import build_services

        _services = build_services(Settings.from_env())
    return _services
