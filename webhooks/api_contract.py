"""Each REST operation declared once, where its view is: the route (method and path) and its
contract (summary, the request's body, path, query and header models, and per status code the
answer's model and the headers it always carries), in one typed declaration.

`Routes(bp).post("/changes", ...)` registers the Flask route from the declaration's own method
and path, so the two cannot disagree, and records the declaration; webhooks/openapi.py generates
the document's paths from the declarations of the routes the app serves. A route registered
without a declaration, or a declaration whose route the app does not serve, is drift that
`drift()` names and tests/api/test_openapi.py fails on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from flask import Blueprint, Flask
from pydantic import BaseModel

from bot.store.clients import Scope

JSON = "application/json"
Method = Literal["get", "post", "put", "patch", "delete"]
#: A JSON Schema written out, for the few answers that have no model (the document itself, an
#: HTML page).
RawSchema = Mapping[str, Any]
View = TypeVar("View", bound=Callable[..., Any])
#: Methods Flask adds to every rule by itself, never declared.
_IMPLICIT = {"HEAD", "OPTIONS"}


@dataclass(frozen=True)
class Reply:
    """One status code's answer: what it means, its body's model and the headers it always
    carries (a model whose fields, by alias, are the headers)."""

    description: str
    body: type[BaseModel] | RawSchema | None = None
    headers: type[BaseModel] | None = None
    #: the body's media type; with no `body`, the answer is only said to be of this type
    media: str = JSON


@dataclass(frozen=True)
class Operation:
    """One method on one path (OpenAPI's `{name}` for a path parameter), and its contract."""

    method: Method
    path: str
    summary: str
    tag: str
    responses: Mapping[int, Reply]
    operation_id: str | None = None
    #: the JSON request body's model (validated as webhooks/api_refusals.py's `validated`)
    body: type[BaseModel] | None = None
    #: the path parameters', the query's and the request headers' models, one field a parameter
    path_params: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    headers: type[BaseModel] | None = None
    #: served without the bearer token (the document says `security: []`)
    public: bool = False
    #: the scope a client's token must hold (bot/store/clients.py; admin holds every scope);
    #: the document names it in the operation's `security`
    scope: Scope | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(method, path) as the document and the route table both name the operation."""
        return self.method, self.path


#: Every declaration made through `Routes`, in the order the views were declared.
DECLARED: list[Operation] = []


@dataclass
class Routes:
    """A blueprint's declared routes: each decorator registers the route and its contract."""

    bp: Blueprint
    registry: list[Operation] = field(default_factory=lambda: DECLARED)
    #: endpoint -> its declarations (the blueprint's before_request reads `public` and `scope`)
    by_endpoint: dict[str, list[Operation]] = field(default_factory=dict)

    def get(self, path: str, **contract: Any) -> Callable[[View], View]:
        """A GET route and its contract (`Operation`'s fields but method and path)."""
        return self.route("get", path, **contract)

    def post(self, path: str, **contract: Any) -> Callable[[View], View]:
        """A POST route and its contract."""
        return self.route("post", path, **contract)

    def route(self, method: Method, path: str, **contract: Any) -> Callable[[View], View]:
        """Registers `path` (under the blueprint's prefix) for `method` on the view, and the
        declaration with it."""
        prefix = (self.bp.url_prefix or "").rstrip("/")
        operation = Operation(method=method, path=prefix + path, **contract)

        def register(view: View) -> View:
            self.bp.add_url_rule(flask_rule(path), view_func=view, methods=[method.upper()])
            endpoint = f"{self.bp.name}.{view.__name__}"
            self.by_endpoint.setdefault(endpoint, []).append(operation)
            self.registry.append(operation)
            return view

        return register

    def is_public(self, endpoint: str | None) -> bool:
        """Whether the endpoint's operations are declared public (an unknown one is not)."""
        declared = self.by_endpoint.get(endpoint or "", [])
        return bool(declared) and all(operation.public for operation in declared)

    def scope_of(self, endpoint: str | None) -> Scope | None:
        """The scope the endpoint's operations declare (None: a valid token is enough)."""
        scopes = {operation.scope for operation in self.by_endpoint.get(endpoint or "", [])}
        assert len(scopes) <= 1, f"{endpoint} declares several scopes: {scopes}"
        return next(iter(scopes), None)


def flask_rule(path: str) -> str:
    """`/changes/{operation_id}` as Flask writes it, `/changes/<operation_id>`."""
    return re.sub(r"{(\w+)}", r"<\1>", path)


def served(app: Flask) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves but `static`, the path in OpenAPI's form
    (`<x>` and `<converter:x>` become `{x}`); HEAD and OPTIONS, which Flask adds, left out."""
    routes: set[tuple[str, str]] = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        routes.update((method.lower(), path) for method in (rule.methods or set()) - _IMPLICIT)
    return routes


@dataclass(frozen=True)
class Drift:
    """Routes and declarations that do not meet."""

    #: served routes no declaration describes
    undeclared: frozenset[tuple[str, str]]
    #: declarations of routes the app does not serve
    unrouted: frozenset[tuple[str, str]]

    def __bool__(self) -> bool:
        return bool(self.undeclared or self.unrouted)


def drift(app: Flask, declarations: tuple[Operation, ...]) -> Drift:
    """What the app serves without a declaration, and what is declared but not served; the same
    (method, path) declared twice counts as unrouted (one of them describes nothing)."""
    routes = served(app)
    keys = [operation.key for operation in declarations]
    twice = {key for key in keys if keys.count(key) > 1}
    return Drift(
        undeclared=frozenset(routes - set(keys)),
        unrouted=frozenset((set(keys) - routes) | twice),
    )
