"""A running step's heartbeat, without a thread: the adapters call `beat()` before each call to
GitLab or the approval system, and the drive between steps and before a step's writes.

The drive installs the callback for the duration of its steps (`beating`); it renews the step's
lease on the operation when a third of it has passed (bot/app/steps/lease.py) and raises
`bot.errors.LeaseLost` when another worker holds it now, so the step stops before its next call
or write. Outside a step (the outbox, the hooks check, the CLI) there is no callback and
`beat()` does nothing. A context variable, so each thread (and each in-process job) has its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_BEAT: ContextVar[Callable[[], None] | None] = ContextVar("gitops_heartbeat", default=None)


def beat() -> None:
    """Runs the installed heartbeat, if any (raises LeaseLost when the lease is gone)."""
    callback = _BEAT.get()
    if callback is not None:
        callback()


@contextmanager
def beating(callback: Callable[[], None]) -> Iterator[None]:
    """Installs `callback` as the heartbeat for the block."""
    token = _BEAT.set(callback)
    try:
        yield
    finally:
        _BEAT.reset(token)
