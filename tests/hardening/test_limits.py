"""Slow and oversize requests against a real gunicorn with the production config.

One `gunicorn --config python:webhooks.gunicorn_conf 'gitops_bot.wsgi:create_app()'` (the Procfile's
web process) for the module: one worker with two threads, GITOPS_BODY_TIMEOUT=1, a 64 KiB
body limit, SQLite in a temporary directory. Clients are raw sockets, so a test can stop
half-way through a request as a slowloris client does; every wait is a socket timeout.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.store.engine import make_engine
from bot.store.models import INBOX, OPERATIONS
from tests.api import change_body
from tests.gunicorn import served_gitlab, web_process
from tests.ingress.conftest import fixture_body

pytestmark = pytest.mark.e2e

#: GITOPS_BODY_TIMEOUT for the server under test, in seconds.
TIMEOUT = 1
#: How much later than its deadline an answer may come on a busy two-core machine.
MARGIN = 3.0
LIMIT = 64 * 1024
THREADS = 2
SECRET = "limits-hook-secret"
TOKEN = "limits-api-token"


@dataclass
class Server:
    """The running gunicorn: its port, its database and what it logged so far."""

    port: int
    engine: Engine
    log: list[str]
    #: the process's XDG_RUNTIME_DIR
    runtime: Path

    def connect(self) -> socket.socket:
        """A raw TCP connection to the server."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def metric(self, part: str) -> float:
        """gitops_request_read_timeouts_total{part=...} as the worker reports it."""
        with contextlib.closing(self.connect()) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            status, text = read_answer(sock, within=10, raw=True)
        assert status == 200
        found = re.search(
            rf'^gitops_request_read_timeouts_total{{part="{part}"}} (\S+)$', text, re.M
        )
        return float(found.group(1)) if found else 0.0

    def stored_delivery(self, key: str) -> bool:
        """Whether a webhook delivery with this Idempotency-Key reached the inbox."""
        query = (
            select(func.count()).select_from(INBOX).where(INBOX.c.delivery_key == f"gitlab:{key}")
        )
        with self.engine.connect() as conn:
            return bool(conn.execute(query).scalar_one())

    def delivery_row(self, key: str) -> tuple[str, str | None, int] | None:
        """(status, reason, body length) of the webhook delivery with this Idempotency-Key."""
        query = select(INBOX.c.status, INBOX.c.reason, func.length(INBOX.c.body)).where(
            INBOX.c.delivery_key == f"gitlab:{key}"
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row[0], row[1], int(row[2]))

    def stored_change(self, subject_id: str) -> bool:
        """Whether an API change request for this subject became an operation."""
        query = (
            select(func.count())
            .select_from(OPERATIONS)
            .where(OPERATIONS.c.subject_id == subject_id)
        )
        with self.engine.connect() as conn:
            return bool(conn.execute(query).scalar_one())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The Procfile's web process on a free port, until the module's tests are done."""
    database_url = f"sqlite:///{tmp_path_factory.mktemp('limits') / 'bot.sqlite3'}"
    engine = make_engine(database_url)
    runtime = tmp_path_factory.mktemp("runtime")
    settings = {
        # where gunicorn would put its control socket (test_no_control_socket)
        "XDG_RUNTIME_DIR": str(runtime),
        "WEB_CONCURRENCY": "1",
        "GITOPS_WEB_THREADS": str(THREADS),
        "GITOPS_BODY_TIMEOUT": str(TIMEOUT),
        "GITOPS_MAX_BODY_BYTES": str(LIMIT),
        "GITOPS_WEBHOOK_MAX_BODY_BYTES": str(LIMIT),
        "GITOPS_DATABASE_URL": database_url,
        "GITOPS_WEBHOOK_SECRET": SECRET,
        "GITOPS_API_TOKEN": TOKEN,
        "GITOPS_ALLOWED_PATHS": "config/",
        # no GitLab here: the repositories' policy files are not read
        "GITOPS_POLICY_FILES": "off",
    }
    try:
        with served_gitlab() as gitlab, web_process({**settings, **gitlab}) as web:
            yield Server(web.port, engine, web.log, runtime)
    finally:
        engine.dispose()


# -- raw HTTP --------------------------------------------------------------------------------------


def read_answer(sock: socket.socket, within: float, raw: bool = False) -> tuple[int, Any]:
    """The status and JSON body (text when `raw`) of the answer on `sock`.

    (0, None) when the server closed the connection without answering; an AssertionError when
    neither happened within `within` seconds.
    """
    sock.settimeout(within)
    response = http.client.HTTPResponse(sock, method="POST")
    try:
        response.begin()
        body = response.read()
    except (http.client.RemoteDisconnected, ConnectionResetError):
        return 0, None
    except TimeoutError:
        raise AssertionError(f"neither an answer nor a close within {within} s") from None
    finally:
        response.close()
    text = body.decode()
    return response.status, text if raw else json.loads(text)


def request_head(kind: str, *, length: int | None, key: str = "") -> bytes:
    """A POST's request line and headers: a GitLab webhook or an API change request.

    `length` None: Transfer-Encoding chunked.
    """
    if kind == "gitlab":
        lines = [
            "POST /webhooks/gitlab HTTP/1.1",
            "X-Gitlab-Event: Pipeline Hook",
            f"X-Gitlab-Token: {SECRET}",
            f"Idempotency-Key: {key}",
        ]
    else:
        lines = ["POST /api/v1/changes HTTP/1.1", f"Authorization: Bearer {TOKEN}"]
    lines += ["Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Sent:
    """One request's body and how to find it in the database afterwards."""

    kind: str
    body: bytes
    key: str

    def stored(self, server: Server) -> bool:
        """Whether the bot kept this request (an inbox row, or an operation)."""
        if self.kind == "gitlab":
            return server.stored_delivery(self.key)
        return server.stored_change(self.key)


def new_request(kind: str, size: int | None = None) -> Sent:
    """A valid webhook delivery or change request, with a unique key; padded to `size` bytes."""
    key = f"limits-{uuid.uuid4().hex}"
    if kind == "gitlab":
        body = fixture_body("pipeline.json")
    else:
        body = json.dumps(
            change_body(
                subject_id=key, files=[{"path": "config/app.yaml", "content": "replicas: 2\n"}]
            )
        ).encode()
    if size is not None:
        body = body[:-1] + b" " * (size - len(body)) + b"}"
    return Sent(kind, body, key)


def chunked(body: bytes, piece: int = 4096) -> bytes:
    """`body` in Transfer-Encoding: chunked framing, ending with the last chunk."""
    parts = [
        f"{len(body[i : i + piece]):x}\r\n".encode() + body[i : i + piece] + b"\r\n"
        for i in range(0, len(body), piece)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


# -- slow clients ----------------------------------------------------------------------------------

TIMED_OUT = {
    "error": "request_timeout",
    "detail": f"the request body did not arrive within {TIMEOUT} s",
}


def test_no_control_socket(server: Server) -> None:
    """The web process opens no gunicorn control socket: two web processes on one host would
    share its one path (the second takes it over, the first to stop deletes it), and it is a
    way to reconfigure or stop the workers that nothing of the bot needs."""
    assert list(server.runtime.iterdir()) == []
    assert not [line for line in server.log if "Control socket" in line], server.log


@pytest.mark.parametrize("kind", ["gitlab", "api"])
def test_a_stalled_body_is_answered_408_at_the_deadline_and_nothing_is_stored(
    server: Server, kind: str
) -> None:
    """Headers and half the body, then nothing: a JSON 408 after GITOPS_BODY_TIMEOUT, no row."""
    before = server.metric("body")
    sent = new_request(kind)
    with contextlib.closing(server.connect()) as sock:
        sock.sendall(request_head(kind, length=len(sent.body), key=sent.key))
        sock.sendall(sent.body[: len(sent.body) // 2])
        started = time.monotonic()
        status, body = read_answer(sock, within=TIMEOUT + MARGIN)
        waited = time.monotonic() - started
    assert (status, body) == (408, TIMED_OUT)
    assert TIMEOUT - 0.1 <= waited <= TIMEOUT + MARGIN  # the client got its whole deadline
    assert not sent.stored(server)
    assert server.metric("body") == before + 1
    assert any("request body not received within 1 s" in line for line in server.log)


def test_a_trickled_body_is_cut_at_the_deadline_not_per_read(server: Server) -> None:
    """A byte every 0.2 s keeps every single read short; the whole body still has 1 s: 408."""
    sent = new_request("gitlab")
    with contextlib.closing(server.connect()) as sock:
        sock.sendall(request_head("gitlab", length=len(sent.body), key=sent.key))
        started = time.monotonic()
        trickled = 0
        sock.settimeout(0.2)
        while time.monotonic() - started < TIMEOUT + MARGIN:
            try:
                sock.recv(1, socket.MSG_PEEK)
                break  # an answer (or a close) is there
            except TimeoutError:
                sock.sendall(sent.body[trickled : trickled + 1])
                trickled += 1
        status, body = read_answer(sock, within=1)
        waited = time.monotonic() - started
    assert (status, body) == (408, TIMED_OUT)
    assert trickled >= 4  # the client never stopped sending
    assert waited <= TIMEOUT + MARGIN
    assert not sent.stored(server)


@pytest.mark.parametrize("how", ["stalled", "trickled"])
def test_headers_not_finished_within_the_deadline_close_the_connection(
    server: Server, how: str
) -> None:
    """Half a request line and headers (or a byte every 0.2 s): closed, the thread freed."""
    before = server.metric("headers")
    head = request_head("gitlab", length=10, key=uuid.uuid4().hex)
    with contextlib.closing(server.connect()) as sock:
        sock.sendall(head[:40])
        started = time.monotonic()
        if how == "trickled":
            sock.settimeout(0.2)
            for byte in head[40:-4]:
                try:
                    sock.recv(1, socket.MSG_PEEK)
                    break  # an answer (or a close) is there
                except TimeoutError:
                    sock.sendall(bytes([byte]))
                except ConnectionResetError:
                    break
        status, _ = read_answer(sock, within=TIMEOUT + MARGIN)
        waited = time.monotonic() - started
    assert status == 0  # closed without an answer
    assert waited <= TIMEOUT + MARGIN
    assert server.metric("headers") == before + 1


def test_slow_clients_holding_every_thread_do_not_stop_the_bot_answering(server: Server) -> None:
    """As many slowloris clients as threads (headers, body): a delivery is still answered 2xx
    and stored once their deadline frees the threads; each slow client is cut off."""
    slow_head = new_request("gitlab")
    slow_body = new_request("gitlab")
    with (
        contextlib.closing(server.connect()) as stalled_headers,
        contextlib.closing(server.connect()) as stalled_body,
    ):
        stalled_headers.sendall(request_head("gitlab", length=10, key=slow_head.key)[:50])
        stalled_body.sendall(
            request_head("gitlab", length=len(slow_body.body), key=slow_body.key)
            + slow_body.body[:100]
        )
        started = time.monotonic()
        normal = new_request("gitlab")
        with contextlib.closing(server.connect()) as sock:
            sock.sendall(request_head("gitlab", length=len(normal.body), key=normal.key))
            sock.sendall(normal.body)
            status, body = read_answer(sock, within=TIMEOUT + MARGIN)
        assert time.monotonic() - started <= TIMEOUT + MARGIN
        assert 200 <= status < 300, body
        assert normal.stored(server)
        assert read_answer(stalled_headers, within=MARGIN)[0] == 0
        assert read_answer(stalled_body, within=MARGIN) == (408, TIMED_OUT)
    assert not slow_head.stored(server)
    assert not slow_body.stored(server)


# -- oversize bodies -------------------------------------------------------------------------------

TOO_LARGE = "request_entity_too_large"


def test_a_declared_content_length_over_the_limit_is_413_before_the_body_is_sent(
    server: Server,
) -> None:
    """An API request with Content-Length one byte over the limit: 413 at once, without
    waiting for the body."""
    sent = new_request("api")
    with contextlib.closing(server.connect()) as sock:
        sock.sendall(request_head("api", length=LIMIT + 1, key=sent.key))
        started = time.monotonic()
        status, body = read_answer(sock, within=TIMEOUT)  # well before a body deadline
        waited = time.monotonic() - started
    assert status == 413
    assert body["error"] == TOO_LARGE
    assert waited < TIMEOUT
    assert not sent.stored(server)


def test_an_authenticated_webhook_over_the_limit_is_2xx_and_quarantined_unread(
    server: Server,
) -> None:
    """GitLab disables a hook after four 4xx answers in a row: an authenticated delivery
    declaring a body over GITOPS_WEBHOOK_MAX_BODY_BYTES is answered 2xx at once, without
    waiting for the body, and kept quarantined with its size as the reason (no body kept)."""
    sent = new_request("gitlab")
    with contextlib.closing(server.connect()) as sock:
        sock.sendall(request_head("gitlab", length=LIMIT + 1, key=sent.key))
        started = time.monotonic()
        status, body = read_answer(sock, within=TIMEOUT)
        waited = time.monotonic() - started
    assert 200 <= status < 300, body
    assert body["status"] == "quarantined"
    assert waited < TIMEOUT
    row = server.delivery_row(sent.key)
    assert row is not None
    assert row[0] == "quarantined"
    assert f"body of {LIMIT + 1} bytes over GITOPS_WEBHOOK_MAX_BODY_BYTES ({LIMIT})" in str(row[1])
    assert row[2] == 0


def test_a_chunked_api_body_over_the_limit_is_413_and_one_within_it_is_accepted(
    server: Server,
) -> None:
    """No Content-Length: the body is cut off past the limit (413, nothing stored); the same
    request just under the limit goes through."""
    small = new_request("api", size=LIMIT - 10)
    large = new_request("api", size=LIMIT + 8192)
    answers = []
    for sent in (small, large):
        with contextlib.closing(server.connect()) as sock:
            sock.sendall(request_head("api", length=None, key=sent.key) + chunked(sent.body))
            answers.append(read_answer(sock, within=10))
    (small_status, small_body), (large_status, large_body) = answers
    assert 200 <= small_status < 300, small_body
    assert small.stored(server)
    assert large_status == 413, large_body
    assert large_body["error"] == TOO_LARGE
    assert not large.stored(server)


def test_a_chunked_webhook_over_the_limit_is_quarantined_and_one_within_it_is_accepted(
    server: Server,
) -> None:
    """No Content-Length: an authenticated webhook body is read to one byte past the limit,
    then answered 2xx and quarantined (nothing of it kept); one just under goes through."""
    small = new_request("gitlab", size=LIMIT - 10)
    large = new_request("gitlab", size=LIMIT + 8192)
    answers = []
    for sent in (small, large):
        with contextlib.closing(server.connect()) as sock:
            sock.sendall(request_head("gitlab", length=None, key=sent.key) + chunked(sent.body))
            answers.append(read_answer(sock, within=10))
    (small_status, small_body), (large_status, large_body) = answers
    assert 200 <= small_status < 300, small_body
    assert server.delivery_row(small.key) is not None
    assert server.delivery_row(small.key)[0] != "quarantined"  # type: ignore[index]
    assert 200 <= large_status < 300, large_body
    row = server.delivery_row(large.key)
    assert row is not None
    assert row[0] == "quarantined"
    assert row[2] == 0


@pytest.mark.parametrize("value", ["0", "-5", "ten"])
def test_a_body_timeout_that_bounds_nothing_is_refused_at_start(value: str) -> None:
    """GITOPS_BODY_TIMEOUT must be a whole number of seconds, at least 1: the bot says so."""
    with pytest.raises(ValueError, match="GITOPS_BODY_TIMEOUT"):
        Settings.from_env({"GITOPS_BODY_TIMEOUT": value})
    assert Settings.from_env({}).body_timeout == 10
    assert Settings.from_env({"GITOPS_BODY_TIMEOUT": "3"}).body_timeout == 3
