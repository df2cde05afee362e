"""Log lines as a process writes them: the real handler of bot/logs.py onto a string, for tests."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import structlog

from bot import logs
from bot.config import LogSettings


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Lines:
    """What was logged onto the stream."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    @property
    def text(self) -> str:
        """Everything written, as written."""
        return self.stream.getvalue()

    def json(self) -> list[dict[str, Any]]:
        """Each line parsed as JSON (a line that is not JSON fails the test here)."""
        return [json.loads(line) for line in self.text.splitlines()]

    def about(self, operation_id: str) -> list[dict[str, Any]]:
        """The JSON lines naming `operation_id`."""
        return [line for line in self.json() if line.get("operation_id") == operation_id]


@contextmanager
def captured(
    monkeypatch: pytest.MonkeyPatch,
    role: str = "worker",
    settings: LogSettings | None = None,
    stream: io.StringIO | None = None,
) -> Iterator[Lines]:
    """This process's logging configured by bot/logs.py onto a string (JSON unless `settings`
    say otherwise), beside pytest's own capture; put back as it was afterwards."""
    stream = io.StringIO() if stream is None else stream
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", *logs.RQ_LOGGERS, *logs.QUIET)}
    monkeypatch.setattr(logs, "_role", None)
    logs.configure(role, settings or LogSettings(format="json"), stream, force=True)
    try:
        yield Lines(stream)
    finally:
        for handler in [h for h in root.handlers if h.name == logs.HANDLER_NAME]:
            root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
