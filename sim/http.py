"""What the fakes share: a small threaded HTTP server on 127.0.0.1, and a timer thread.

The fakes answer like the real systems and act later ("approve after a moment", "deploy after
the merge") without a thread per wait: one `Timers` thread runs each action when it is due.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger(__name__)


class _QuietHandler(WSGIRequestHandler):
    """No access log line per request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Drops the access log line."""


class Server:
    """Runs a WSGI app on a free port of 127.0.0.1 in a background thread."""

    def __init__(self, app: WSGIApplication, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=_QuietHandler
        )
        self.url = f"http://{host}:{self._server.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-http-{self._server.port}",
            daemon=True,
        )

    def start(self) -> str:
        """Starts serving; the base URL."""
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stops serving and closes the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class Timers:
    """One thread that runs callables when they are due (a heap and a condition, no polling)."""

    def __init__(self, name: str = "fake-timers") -> None:
        self._heap: list[tuple[float, int, Callable[[], object]]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_in(self, seconds: float, action: Callable[[], object]) -> None:
        """Runs `action` in about `seconds` (in this object's thread)."""
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), action))
            self._cond.notify()

    def stop(self) -> None:
        """Stops the thread; actions not yet due are dropped."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, _, action = heapq.heappop(self._heap)
            try:
                action()
            except Exception:
                log.exception("a fake's timed action failed")


def json_response(
    start_response: StartResponse, status: int, body: bytes, headers: Iterable[tuple[str, str]] = ()
) -> list[bytes]:
    """Starts a JSON response and returns its body for the WSGI server."""
    reason = {200: "OK", 201: "Created", 202: "Accepted", 404: "Not Found", 409: "Conflict"}
    start_response(
        f"{status} {reason.get(status, 'Status')}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers],
    )
    return [body]


def remote_port(environ: WSGIEnvironment) -> int | None:
    """The caller's TCP port (tests find the calling process by it)."""
    port = environ.get("REMOTE_PORT")
    return int(port) if port else None


def read_body(environ: WSGIEnvironment, limit: int = 1 << 20) -> bytes:
    """The request body (at most `limit` bytes)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    data: bytes = environ["wsgi.input"].read(min(length, limit)) if length else b""
    return data
