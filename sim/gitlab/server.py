"""The two transports: `responses` callbacks in-process, and a real threaded local server."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import requests
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from .app import IN_PROCESS, TIMEOUT_MARK, DoubleApp

if TYPE_CHECKING:
    import responses

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD")
#: Request headers werkzeug's EnvironBuilder takes as arguments, not as headers.
_BODY_HEADERS = {"content-type", "content-length"}


def mount(app: DoubleApp, mock: responses.RequestsMock, base_url: str) -> None:
    """Registers one callback per method for everything under `{base_url}/api/v4/` and
    `{base_url}/oauth/` (the OAuth provider: oauth.py)."""
    pattern = re.compile(re.escape(base_url.rstrip("/")) + r"/(?:api/v4|oauth)/.*")
    for method in METHODS:
        mock.add_callback(method, pattern, callback=_Adapter(app), content_type=None)


class _Adapter:
    """A `responses` callback that runs the request through the WSGI app."""

    def __init__(self, app: DoubleApp) -> None:
        self.app = app

    def __call__(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], bytes]:
        url = urlsplit(str(request.url))
        body: Any = request.body
        if isinstance(body, str):
            body = body.encode()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _BODY_HEADERS]
        raw_uri = url.path + (f"?{url.query}" if url.query else "")
        builder = EnvironBuilder(
            path=url.path,
            base_url=f"{url.scheme}://{url.netloc}",
            query_string=url.query,
            method=str(request.method),
            headers=headers,
            data=body or b"",
            content_type=request.headers.get("Content-Type"),
        )
        try:
            environ = builder.get_environ()
        finally:
            builder.close()
        environ.update({"RAW_URI": raw_uri, "REQUEST_URI": raw_uri, IN_PROCESS: True})
        response = Response.from_app(self.app, environ)
        if response.headers.get(TIMEOUT_MARK):
            raise requests.exceptions.ReadTimeout(f"injected timeout: {request.method} {url.path}")
        out = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        return response.status_code, out, response.get_data()


class _QuietHandler(WSGIRequestHandler):
    """No access log lines on stderr for every request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Drops the access log line."""


@contextmanager
def serve(app: DoubleApp, host: str = "127.0.0.1") -> Iterator[str]:
    """Runs the app on a free port in a background thread; yields the base URL."""
    server = make_server(host, 0, app, threaded=True, request_handler=_QuietHandler)
    app.stopping.clear()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://{host}:{server.port}"
    finally:
        app.stopping.set()
        app.release_hung()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
