"""Log lines: one JSON object a line (or console text), saying which change each is about.

A process calls `configure(role, settings)` once at start (the `gitops-bot` commands; for the
Procfile's `web`, gunicorn's logger class in webhooks/gunicorn_conf.py). The standard library's
`logging` then runs through structlog's `ProcessorFormatter`, so the bot's own
`log.info(..., extra={...})` and RQ's, gunicorn's and Alembic's lines come out alike: `time`
(ISO 8601, UTC), `level`, `logger`, `event`, `role`, `pid`, every `extra` key, and the keys
bound for the work in hand.

Work on a change binds its keys where it begins (`scope`): the drive job (`operation_id`,
`project`, `mr_iid`, `step`), the processing of a stored delivery (`correlation_id`: the
delivery's key), an API submission (`correlation_id`: its Idempotency-Key), an outbox dispatch.
A job carries `correlation_id` to the jobs it enqueues (RQ job meta, `carried`), and whoever
runs a job starts it with nothing bound but that (`job_scope`), so nothing leaks from one job
to the next.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

import structlog
from structlog.contextvars import bind_contextvars, clear_contextvars, get_contextvars
from structlog.typing import EventDict, Processor, WrappedLogger

from bot.config import LogSettings

#: RQ's and rq-scheduler's loggers (RQ sets levels on some of them itself: each is named).
RQ_LOGGERS = (
    "rq",
    "rq.worker",
    "rq.job",
    "rq.queue",
    "rq.scheduler",
    "rq.registry",
    "rq_scheduler",
)
#: The bound keys a job hands on to the jobs it enqueues.
CARRIED = ("correlation_id",)
#: The keys every line starts with, then the change's when known, in this order (the rest
#: follow as they were added).
FIRST = ("time", "level", "logger", "event", "role", "pid")
CHANGE = ("operation_id", "project", "mr_iid", "correlation_id", "step")
#: Third-party loggers whose INFO lines say nothing an operator needs (held at WARNING unless
#: GITOPS_LOG_LEVEL is DEBUG): Alembic lists its plugins each time it is imported.
QUIET = ("alembic.runtime.plugins",)
#: What another handler's formatter may have left on a record: not the caller's `extra`.
_FORMATTER_LEFTOVERS = ("message", "asctime")
#: The name of the root handler `configure` installs (replaced when configured again).
HANDLER_NAME = "gitops-bot"

_role: str | None = None


class _Process:
    """Adds the process's role and pid (read per line: gunicorn's workers are forks) and puts
    the common keys first."""

    def __init__(self, role: str) -> None:
        self.role = role

    def __call__(self, logger: WrappedLogger, name: str, event: EventDict) -> EventDict:
        event["role"] = self.role
        event["pid"] = os.getpid()
        for leftover in _FORMATTER_LEFTOVERS:
            event.pop(leftover, None)
        ordered = {key: event.pop(key) for key in (*FIRST, *CHANGE) if key in event}
        ordered.update(event)
        return ordered


def log_format(settings: LogSettings, stream: IO[str]) -> str:
    """ "json" or "text": GITOPS_LOG_FORMAT, else text on a terminal and JSON otherwise."""
    if settings.format is not None:
        return settings.format
    return "text" if _isatty(stream) else "json"


def configure(
    role: str, settings: LogSettings, stream: IO[str] | None = None, *, force: bool = False
) -> bool:
    """Routes every logger to one handler on `stream` (stderr) in the chosen format, for a
    process of `role` (web, worker, scheduler, serve, cli); True when it did.

    Like `logging.basicConfig`, it leaves alone a root logger that another handler already
    serves (a test runner's capture) unless `force`, which adds its handler beside the others;
    its own handler it replaces.
    """
    global _role
    stream = sys.stderr if stream is None else stream
    root = logging.getLogger()
    if not force and any(h.name != HANDLER_NAME for h in root.handlers):
        return False
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
        _Process(role),
    ]
    renderer: list[Processor]
    if log_format(settings, stream) == "json":
        renderer = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        renderer = [
            structlog.dev.ConsoleRenderer(
                colors=_isatty(stream),
                timestamp_key="time",
                exception_formatter=structlog.dev.plain_traceback,
            )
        ]
    handler = logging.StreamHandler(stream)
    handler.name = HANDLER_NAME
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    for old in [h for h in root.handlers if h.name == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.level)
    for name in RQ_LOGGERS:
        logging.getLogger(name).setLevel(settings.rq_level)
    for name in QUIET:
        logging.getLogger(name).setLevel("DEBUG" if settings.level == "DEBUG" else "WARNING")
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.PositionalArgumentsFormatter(),
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    _role = role
    return True


def configured() -> str | None:
    """The role `configure` set up this process's logging for (None: not yet)."""
    return _role


def _isatty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def bind(**keys: Any) -> None:
    """Binds the keys that are known (not None) for the rest of the enclosing `scope`."""
    bind_contextvars(**{key: value for key, value in keys.items() if value is not None})


@contextmanager
def scope(**keys: Any) -> Iterator[None]:
    """`keys` (those not None) on every line logged in the block; afterwards what was bound
    before is back and whatever the block bound is gone."""
    before = get_contextvars()
    bind(**keys)
    try:
        yield
    finally:
        clear_contextvars()
        bind_contextvars(**before)


@contextmanager
def job_scope(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """One job: nothing bound but what its enqueuer carried (`carried`), before or after."""
    clear_contextvars()
    bind(**{key: value for key, value in (meta or {}).items() if key in CARRIED})
    try:
        yield
    finally:
        clear_contextvars()


def carried() -> dict[str, Any]:
    """The bound keys a job enqueued now takes along (its RQ meta); empty when none is bound."""
    bound = get_contextvars()
    return {key: bound[key] for key in CARRIED if key in bound}
