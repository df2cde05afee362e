"""Starts the processes: gunicorn for web, and the embedded one-process default."""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from bot.config import Settings
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from webhooks import create_app


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    """Gunicorn driven from code, loading the Flask app factory in each worker."""

    def __init__(self, settings: Settings, options: dict[str, Any]) -> None:
        self._settings = settings
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return create_app(self._settings)


def _upgrade_schema(settings: Settings) -> None:
    engine = make_engine(settings.database_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def _options(host: str, port: int, **extra: Any) -> dict[str, Any]:
    from webhooks import gunicorn_conf as conf

    return {
        "bind": f"{host}:{port}",
        "worker_class": conf.worker_class,
        "timeout": conf.timeout,
        "graceful_timeout": conf.graceful_timeout,
        "keepalive": conf.keepalive,
        "limit_request_line": conf.limit_request_line,
        "limit_request_fields": conf.limit_request_fields,
        "limit_request_field_size": conf.limit_request_field_size,
        "errorlog": "-",
        **extra,
    }


def web(settings: Settings, *, host: str, port: int) -> None:
    """The web process: schema upgraded, then gunicorn with the production settings."""
    from webhooks import gunicorn_conf as conf

    _upgrade_schema(settings)
    _Gunicorn(settings, _options(host, port, workers=conf.workers, threads=conf.threads)).run()


def serve(settings: Settings, *, host: str, port: int) -> None:
    """The embedded default: one process, SQLite, the in-process queue, schema upgraded first."""
    _upgrade_schema(settings)
    _Gunicorn(settings, _options(host, port, workers=1, threads=8)).run()
