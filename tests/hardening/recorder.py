"""A local TCP server that records every connection it accepts: the proof that something was
never fetched. It listens on 127.0.0.1 (an ephemeral port) in a thread and, by default, never
answers, as a server holding a client forever would; `redirect_to` makes it answer each
connection with an HTTP redirect there instead (the first hop a fetcher would follow)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Recorder:
    """Counts the connections to `url`; hold it open with `recording()`."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)  # the accept loop looks at `_stop` this often
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self._redirect_to = redirect_to
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="recorder", daemon=True)

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>"""
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            if self._redirect_to is None:
                self._held.append(conn)  # never answered
                continue
            answer = (
                "HTTP/1.1 302 Found\r\n"
                f"Location: {self._redirect_to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            try:
                conn.sendall(answer.encode())
            finally:
                conn.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        for conn in self._held:
            conn.close()


@contextmanager
def recording(redirect_to: str | None = None) -> Iterator[Recorder]:
    """A Recorder listening for the block."""
    recorder = Recorder(redirect_to)
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.stop()
