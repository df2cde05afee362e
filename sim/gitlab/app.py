"""The WSGI app in front of the state: auth, faults, routing, call recording.

Both transports (the `responses` callback and the real server) run this same app.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from werkzeug.wrappers import Request, Response

from . import (
    notes,
    oauth,
    routes_compare,
    routes_mr,
    routes_protected,
    routes_repo,
    routes_tags,
    routes_trains,
)
from .errors import ApiError, unauthorized
from .faults import Call, FaultPlan
from .model import User
from .routing import Ctx, Reply, router

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

    from .state import State

#: Set in the environ by the `responses` adapter: a timeout must raise, not hang.
IN_PROCESS = "gitlab_double.in_process"
#: Response header the app uses to tell the `responses` adapter to raise ReadTimeout.
TIMEOUT_MARK = "X-Gitlab-Double-Timeout"
#: Route modules, imported for their registrations on `router`.
ROUTE_MODULES = (
    notes,
    routes_compare,
    routes_mr,
    routes_protected,
    routes_repo,
    routes_tags,
    routes_trains,
)


@dataclass
class HungCall:
    """A call a real-server "timeout" fault is holding: who made it, and its release."""

    method: str
    path: str
    #: the caller's TCP port (tests find the calling process by it)
    remote_port: int | None
    released: threading.Event = field(default_factory=threading.Event)


class DoubleApp:
    """WSGI callable: one request at a time through the state, under the double's lock."""

    def __init__(
        self,
        state: State,
        lock: threading.RLock,
        faults: FaultPlan,
        calls: list[Call],
        stopping: threading.Event,
    ) -> None:
        self.state = state
        self.lock = lock
        self.faults = faults
        self.calls = calls
        self.stopping = stopping
        #: How long a "timeout" fault holds a real-server answer (bounded; the test double only).
        self.hang_seconds = 3.0
        #: calls held by "timeout" faults on the real server, oldest first
        self.hung: list[HungCall] = []

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        raw_uri = environ.get("RAW_URI") or environ.get("REQUEST_URI") or quote(request.path)
        response, hang = self.handle(request, urlsplit(raw_uri).path)
        if hang and environ.get(IN_PROCESS):
            response.headers[TIMEOUT_MARK] = "1"
        elif hang:
            # The client gives up first; the mutation (if any) has already happened.
            port = environ.get("REMOTE_PORT")
            path = unquote(urlsplit(raw_uri).path).removeprefix("/api/v4")
            held = HungCall(request.method, path, int(port) if port else None)
            with self.lock:
                self.hung.append(held)
            if not self.stopping.is_set():
                held.released.wait(min(self.hang_seconds, 30.0))
            held.released.set()
        return response(environ, start_response)

    def release_hung(self) -> None:
        """Ends every hold now."""
        with self.lock:
            for held in self.hung:
                held.released.set()

    def handle(self, request: Request, raw_path: str) -> tuple[Response, bool]:
        """The answer to one request, and whether it must hang (a timeout fault)."""
        if raw_path.startswith("/oauth/"):
            return oauth.answer(self.state, self.lock, request, raw_path), False
        if not raw_path.startswith("/api/v4/"):
            return _response(Reply(404, {"error": "404 Not Found"})), False
        api_path = raw_path[len("/api/v4") :]
        path = unquote(api_path)
        query = [(k.removesuffix("[]"), v) for k, v in request.args.items(multi=True)]
        body = _body(request)
        params = _merge_params(query, body)
        with self.lock:
            fault = self.faults.take(request.method, path)
            if fault is not None and not fault.is_timeout:
                reply = fault.reply()
            elif fault is not None and not fault.apply:
                reply = Reply(0)
            else:
                reply = self._dispatch(request, api_path, params, query)
            user = self._user(request)
            call = Call(
                method=request.method,
                path=path,
                query=_merge_params(query, None),
                body=body,
                status=reply.status,
                user=user.username if user else None,
                fault=None if fault is None else str(fault.status),
            )
            self.calls.append(call)
        return _response(reply), fault is not None and fault.is_timeout

    def _user(self, request: Request) -> User | None:
        """The caller by `PRIVATE-TOKEN` or `Authorization: Bearer`."""
        token = request.headers.get("PRIVATE-TOKEN")
        if token is None:
            token = _bearer(request)
        return self.state.user_by_token(token) if token else None

    def _dispatch(
        self,
        request: Request,
        api_path: str,
        params: dict[str, Any],
        query: list[tuple[str, str]],
    ) -> Reply:
        """Authenticates, routes and runs the handler; ApiError becomes GitLab's answer."""
        try:
            user = self._user(request)
            if user is None:
                raise unauthorized()
            oauth.check_scope(self.state, _bearer(request), request.method, api_path)
            handler, args = router.match(request.method, api_path)
            # the request's own (still encoded) path: pagination links name `group%2Fproject`
            # as one segment, as GitLab's do (request.base_url decodes it)
            url = f"{request.host_url.rstrip('/')}{request.root_path}/api/v4{api_path}"
            return handler(Ctx(self.state, user, args, params, url, query))
        except ApiError as error:
            return Reply(error.status, None if error.status == 304 else error.body())


def _bearer(request: Request) -> str | None:
    """The token of `Authorization: Bearer`, if any."""
    auth = request.headers.get("Authorization", "")
    return auth[len("bearer ") :].strip() if auth.lower().startswith("bearer ") else None


def _body(request: Request) -> Any:
    """The JSON or form body, or None."""
    if request.is_json:
        return request.get_json(silent=True)
    if request.form:
        return request.form.to_dict(flat=True)
    return None


def _merge_params(query: list[tuple[str, str]], body: Any) -> dict[str, Any]:
    """Grape's view: query parameters (repeated keys as lists) overlaid by the body."""
    params: dict[str, Any] = {}
    for key, value in query:
        if key in params:
            existing = params[key]
            params[key] = [*existing, value] if isinstance(existing, list) else [existing, value]
        else:
            params[key] = value
    if isinstance(body, dict):
        params.update(body)
    return params


def _response(reply: Reply) -> Response:
    """A werkzeug response for a reply: JSON, raw bytes, or empty."""
    if reply.body is None:
        response = Response(b"", status=reply.status or 504)
    elif isinstance(reply.body, bytes):
        response = Response(reply.body, status=reply.status, mimetype="text/plain")
    else:
        data = json.dumps(reply.body)
        response = Response(data, status=reply.status, mimetype="application/json")
    for name, value in reply.headers.items():
        response.headers[name] = value
    return response
