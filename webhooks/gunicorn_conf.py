"""Gunicorn settings for the `web` process (Procfile) and `gitops-bot web`.

Webhook handlers only verify, store and enqueue, so threads handle bursts cheaply; the timeouts
bound slow clients (GitLab itself gives up after 10 s).
"""

from __future__ import annotations

import os
from typing import Any

bind = f"{os.environ.get('GITOPS_BIND', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = int(os.environ.get("GITOPS_WEB_THREADS", "8"))
timeout = 30
graceful_timeout = 20
keepalive = 5
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = None
errorlog = "-"


def on_starting(server: Any) -> None:
    """Creates or upgrades the schema once, before any worker starts."""
    from bot.config import Settings
    from bot.store.engine import make_engine
    from bot.store.migrate import upgrade

    engine = make_engine(Settings.from_env().database_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
