"""Deadlines on reading a request from a slow client (GITOPS_BODY_TIMEOUT).

gunicorn's gthread worker reads headers and bodies with blocking socket calls and no timeout:
a client that stops half-way (slowloris) holds a worker thread for ever, and the worker
heartbeat (`timeout`) never sees it because the worker's main loop keeps beating. A socket
timeout alone bounds each recv(), not the whole read: a client trickling a byte a second would
still hold the thread. So one thread per process keeps the deadlines, and at a deadline shuts
the read side of the client's socket (`shutdown(SHUT_RD)`): the blocked recv() returns
end-of-file at once, the read fails, and the request is answered 408 (a body) or the
connection closed (headers). Writing the answer still works after SHUT_RD.

`body_deadline()` wraps the body reads (webhooks.ingest.read_body, which the API uses too);
`webhooks.gunicorn_conf.ReadDeadlineWorker` arms the same watchdog around header parsing.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from flask import request
from prometheus_client import Counter
from werkzeug.exceptions import RequestTimeout

from webhooks.context import services_of

log = logging.getLogger(__name__)

READ_TIMEOUTS = Counter(
    "gitops_request_read_timeouts_total",
    "Requests whose headers or body did not arrive within GITOPS_BODY_TIMEOUT, by part "
    "(headers: connection closed; body: answered 408).",
    ["part"],
)

#: How late past its deadline an alarm may go off: expired alarms are collected in one pass,
#: so the watchdog wakes at most this often however many requests there are.
RESOLUTION = 0.05

_ARMED, _CANCELLED, _FIRED = "armed", "cancelled", "fired"


class Alarm:
    """One socket's deadline. cancel() before it fires; it tells whether it fired."""

    __slots__ = ("_watchdog", "deadline", "sock", "state")

    def __init__(self, watchdog: Watchdog, sock: socket.socket, deadline: float) -> None:
        self._watchdog = watchdog
        self.sock: socket.socket | None = sock
        self.deadline = deadline
        self.state = _ARMED

    def cancel(self) -> bool:
        """Disarms the alarm (idempotent); True when it had already fired."""
        with self._watchdog.lock:
            if self.state == _ARMED:
                self.state = _CANCELLED
                self.sock = None  # the heap keeps the alarm until its deadline, not the socket
            return self.state == _FIRED


class Watchdog:
    """Shuts the read side of sockets whose deadline passed, from one thread per process.

    The thread starts on first use in each process (gunicorn forks its workers after loading
    the config) and sleeps on a condition until the earliest deadline.
    """

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self._heap: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()
        self._pid = 0

    def arm(self, sock: socket.socket, seconds: float) -> Alarm:
        """An alarm that shuts `sock`'s read side `seconds` from now unless cancelled first."""
        alarm = Alarm(self, sock, time.monotonic() + seconds)
        with self.lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._heap.clear()
                threading.Thread(target=self._run, name="read-deadlines", daemon=True).start()
            earliest = not self._heap or alarm.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (alarm.deadline, next(self._order), alarm))
            if earliest:
                self.lock.notify()
        return alarm

    def _run(self) -> None:
        with self.lock:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    alarm = heapq.heappop(self._heap)[2]
                    if alarm.state == _ARMED and alarm.sock is not None:
                        alarm.state = _FIRED
                        # closed meanwhile (OSError): nothing left to stop
                        with contextlib.suppress(OSError):
                            alarm.sock.shutdown(socket.SHUT_RD)
                wait = self._heap[0][0] - now + RESOLUTION if self._heap else None
                self.lock.wait(wait)


WATCHDOG = Watchdog()


@contextmanager
def body_deadline() -> Iterator[None]:
    """Reads inside this block must finish within GITOPS_BODY_TIMEOUT seconds, or 408.

    Counted from the start of the block, for the whole body (not per recv()). Only under
    gunicorn, which exposes the client socket; elsewhere (test client) it does nothing. Nothing
    read in a block that timed out reaches the caller, so nothing of it is stored.
    """
    sock = request.environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        yield
        return
    seconds = services_of().settings.body_timeout
    alarm = WATCHDOG.arm(sock, seconds)
    try:
        yield
    except Exception:
        if alarm.cancel():
            raise _timed_out(seconds) from None
        raise
    # gunicorn hands out a body cut short by end-of-file without an error: once the alarm went
    # off, what was read cannot be trusted to be whole
    if alarm.cancel():
        raise _timed_out(seconds)


def _timed_out(seconds: int) -> RequestTimeout:
    READ_TIMEOUTS.labels("body").inc()
    log.warning(
        "request body not received within %s s: answered 408",
        seconds,
        extra={"path": request.path, "content_length": request.content_length},
    )
    return RequestTimeout(f"the request body did not arrive within {seconds} s")
