"""Gunicorn settings for the `web` process (Procfile) and `gitops-bot web`.

Webhook handlers only verify, store and enqueue, so threads handle bursts cheaply. Slow clients
are bounded by GITOPS_BODY_TIMEOUT (default 10 s; GitLab itself gives up after 10 s), which plain
gthread does not do: it reads headers and bodies with blocking calls and no timeout, and its
`timeout` is only the worker heartbeat, which a thread stuck on a slow client never misses.

- nothing sent yet: gthread waits 5 s in a thread, then parks the connection in its poller for
  `keepalive` seconds and closes it (and ReadDeadlineWorker's deadline cuts it at
  GITOPS_BODY_TIMEOUT if that comes first);
- headers started but not finished within GITOPS_BODY_TIMEOUT: ReadDeadlineWorker closes the
  connection (webhooks/body.py);
- a body not whole within GITOPS_BODY_TIMEOUT of the app starting to read it: 408
  (webhooks.ingest.read_body, under webhooks.body.body_deadline);
- a body nobody read (a 401, an ignored event): gthread drains it for at most 5 s, then closes;
- an idle kept-alive connection: closed after `keepalive` seconds, without holding a thread.
"""

from __future__ import annotations

import os
from typing import Any

from gunicorn.glogging import Logger
from gunicorn.workers.gthread import ThreadWorker

bind = f"{os.environ.get('GITOPS_BIND', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "webhooks.gunicorn_conf.ReadDeadlineWorker"
logger_class = "webhooks.gunicorn_conf.StructuredLogger"
threads = int(os.environ.get("GITOPS_WEB_THREADS", "8"))
timeout = 30
graceful_timeout = 20
keepalive = 5
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = None
# No runtime control socket (gunicorn 25.1+ opens one by default at $XDG_RUNTIME_DIR/gunicorn.ctl
# or ~/.gunicorn/gunicorn.ctl): two web processes on one host would share that one path, the
# second taking it over and the first to stop deleting it, and it is a way to resize, reload or
# stop the workers that nothing of the bot uses. Signals still work as ever.
control_socket_disable = True
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


class StructuredLogger(Logger):  # type: ignore[misc]
    """gunicorn's own lines (booting, workers, timeouts) as the bot's: through the one handler
    bot/logs.py installs, with role `web` when nothing configured logging before (the Procfile
    runs gunicorn itself; `gitops-bot web` and `serve` configured it already)."""

    def setup(self, cfg: Any) -> None:
        """gunicorn's setup, then its error log handed to the root handler instead of its own."""
        from bot import logs
        from bot.config import LogSettings

        super().setup(cfg)
        if logs.configured() is None:
            logs.configure("web", LogSettings.from_env())
        for handler in list(self.error_log.handlers):
            self.error_log.removeHandler(handler)
        self.error_log.propagate = True


class ReadDeadlineWorker(ThreadWorker):  # type: ignore[misc]
    """gthread with a deadline on a request's headers: GITOPS_BODY_TIMEOUT from the moment a
    thread takes the connection (data waiting) until the headers are parsed; past it the
    connection is closed and the thread is free. For plain HTTP/1.1, what this config serves
    (TLS ends at the proxy in front)."""

    header_timeout: int = 10

    def init_process(self) -> None:
        """Reads the deadline in the worker process (after the fork), then runs gthread."""
        from bot.config import Settings

        self.header_timeout = Settings.from_env().body_timeout
        super().init_process()

    def handle(self, conn: Any) -> Any:
        """gthread's handle() under a header deadline, disarmed once the headers are in."""
        from webhooks.body import READ_TIMEOUTS, WATCHDOG

        alarm = WATCHDOG.arm(conn.sock, self.header_timeout)
        conn.gitops_header_alarm = alarm
        try:
            return super().handle(conn)
        finally:
            if conn.gitops_header_alarm is alarm:
                conn.gitops_header_alarm = None
                if alarm.cancel():
                    READ_TIMEOUTS.labels("headers").inc()
                    self.log.warning(
                        "request headers from %s not received within %s s: connection closed",
                        conn.client[0] if isinstance(conn.client, tuple) else conn.client,
                        self.header_timeout,
                    )

    def handle_request(self, req: Any, conn: Any) -> Any:
        """The headers are in: the body has its own deadline, read by the app."""
        alarm = conn.gitops_header_alarm
        conn.gitops_header_alarm = None
        if alarm is not None:
            alarm.cancel()
        return super().handle_request(req, conn)
