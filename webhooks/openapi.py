"""The OpenAPI 3.1 document of the service, generated: its paths from the declarations of the
routes the app serves (webhooks/api_contract.py; the REST API's are with their views in
webhooks/api.py), every schema, parameter and header from the pydantic models they name
(webhooks/api_models.py for requests, webhooks/api_views.py for answers).

The routes outside the REST API (webhooks, health, dashboard) are declared here, briefly, in the
same typed form. tests/api/test_openapi.py fails on a served route without a declaration and on
a declaration of a route the app does not serve (`api_contract.drift`); schemathesis runs the
document against the live API (tests/api/test_schemathesis.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from functools import cache
from typing import Any

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from bot.store.clients import Scope
from webhooks import api_contract
from webhooks.api_contract import JSON, Operation, Reply, served
from webhooks.api_models import OperationPath
from webhooks.api_views import AuthenticateHeader, Error, LocationHeader
from webhooks.signin import CallbackQuery

_REF = "#/components/schemas/{model}"

# -- the routes outside the REST API, briefly ------------------------------------------------

_STATUS = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
_HTML = "text/html"
_PAGE = {"type": "string"}
_WEBHOOK_RESPONSES = {
    200: Reply(
        "Authenticated; ignored, duplicate or quarantined (never retried by the sender).", _STATUS
    ),
    202: Reply("Stored in the inbox; processed by a worker.", _STATUS),
    401: Reply("Wrong or missing secret.", Error),
    408: Reply(
        "The body did not arrive within GITOPS_BODY_TIMEOUT seconds; nothing stored.", Error
    ),
    413: Reply("Body larger than the limit.", Error),
    503: Reply("Neither the database nor the queue could take the delivery; send it again.", Error),
}
#: A dashboard page: an API client's token with `read`, a GitLab sign-in's session cookie, or a
#: trusted proxy's header (GITOPS_DASHBOARD_HEADER): webhooks/dashboard_access.py.
_PAGE_RESPONSES = {
    200: Reply("The page.", _PAGE, media=_HTML),
    401: Reply(
        "No client token, GitLab session or proxy header.",
        _PAGE,
        headers=AuthenticateHeader,
        media=_HTML,
    ),
    403: Reply(
        "A client token without `read`, or limited to projects (the dashboard shows every "
        "project).",
        _PAGE,
        media=_HTML,
    ),
}
_NO_SIGNIN = Reply(
    "GitLab sign-in is not set up (GITOPS_OAUTH_CLIENT_ID, GITOPS_OAUTH_CLIENT_SECRET).",
    _PAGE,
    media=_HTML,
)

ELSEWHERE: tuple[Operation, ...] = (
    Operation(
        "post",
        "/webhooks/gitlab",
        "GitLab merge request, pipeline, note and deployment events (X-Gitlab-Token).",
        "webhooks",
        _WEBHOOK_RESPONSES,
        public=True,
    ),
    Operation(
        "post",
        "/webhooks/approval",
        "The approval system's decision (X-Approval-Timestamp, X-Approval-Signature: sha256 "
        "HMAC of `<timestamp>.<body>`, 5-minute window).",
        "webhooks",
        _WEBHOOK_RESPONSES,
        public=True,
    ),
    Operation(
        "post",
        "/webhooks/deploy",
        "The deployment pipeline's word (X-Deploy-Token, or X-Deploy-Timestamp and "
        "X-Deploy-Signature: sha256 HMAC of `<timestamp>.<body>`, 5-minute window; a project in "
        "GITOPS_DEPLOY_SECRETS only with its own secret). A callback naming an operation must "
        "name its project and MR (or merge SHA), else it changes nothing.",
        "webhooks",
        _WEBHOOK_RESPONSES,
        public=True,
    ),
    Operation(
        "get",
        "/healthz",
        "The process is up.",
        "operations",
        {200: Reply("Up.", _STATUS)},
        public=True,
    ),
    Operation(
        "get",
        "/readyz",
        "The database answers, and Redis (unless the queue is the embedded one).",
        "operations",
        {200: Reply("Ready.", _STATUS), 503: Reply("Not ready.", _STATUS)},
        public=True,
    ),
    Operation(
        "get",
        "/metrics",
        "Prometheus metrics (text format).",
        "operations",
        {200: Reply("The metrics.", media="text/plain")},
        public=True,
    ),
    Operation(
        "get",
        "/",
        "The dashboard (HTML): failed, pending, in-flight and recently finished requests.",
        "dashboard",
        _PAGE_RESPONSES,
        scope=Scope.READ,
    ),
    Operation(
        "get",
        "/changes/{operation_id}",
        "One request on the dashboard (HTML): phase, step, hint, timeline and path.",
        "dashboard",
        {**_PAGE_RESPONSES, 404: Reply("No request has this id.", _PAGE, media=_HTML)},
        path_params=OperationPath,
        scope=Scope.READ,
    ),
    Operation(
        "get",
        "/auth/login",
        "Sign in to the dashboard with GitLab: off to GitLab's /oauth/authorize (authorization "
        "code with PKCE, `state` kept in a signed cookie).",
        "dashboard",
        {
            302: Reply("To GitLab.", headers=LocationHeader, media=_HTML),
            404: _NO_SIGNIN,
        },
        public=True,
    ),
    Operation(
        "get",
        "/auth/callback",
        "Where GitLab sends the browser back: the `state` checked against the sign-in started "
        "in this browser, the code traded once, the user let in (GITOPS_DASHBOARD_USERS, or "
        "Reporter in a project of GITOPS_PROJECTS) with a session cookie.",
        "dashboard",
        {
            303: Reply("Signed in: to the dashboard.", headers=LocationHeader, media=_HTML),
            400: Reply(
                "No sign-in started in this browser, a `state` of another, or no code.",
                _PAGE,
                media=_HTML,
            ),
            401: Reply("GitLab refused the code or the sign-in.", _PAGE, media=_HTML),
            403: Reply("The user may not see the dashboard.", _PAGE, media=_HTML),
            404: _NO_SIGNIN,
            502: Reply("GitLab could not be reached or read.", _PAGE, media=_HTML),
        },
        query=CallbackQuery,
        public=True,
    ),
    Operation(
        "post",
        "/auth/logout",
        "Sign out: the browser's GitLab session cookie is removed.",
        "dashboard",
        {200: Reply("Signed out.", _PAGE, media=_HTML)},
        public=True,
    ),
)


#: The bearer scheme's description: what each scope an operation names allows.
SCOPES_TEXT = (
    "An API client's token (`gitops-bot clients create NAME --scope ...`). Each operation "
    "names the scope it needs in its `security`: `read` (list and read changes and queues), "
    "`submit` (request a change), `operate` (retry, cancel), `admin` (promote; holds every "
    "scope). A valid token without the scope is answered 403 `insufficient_scope`; a client "
    "limited to projects is answered 403 `project_not_allowed` for a change in another, and "
    "sees only its projects in lists. GITOPS_API_TOKEN acts as one `admin` client."
)


def declarations() -> tuple[Operation, ...]:
    """Every declaration: the REST API's (with their views), then the other routes'."""
    return (*api_contract.DECLARED, *ELSEWHERE)


# -- from the models ---------------------------------------------------------------------------


@cache
def _schemas(models: tuple[tuple[type[BaseModel], JsonSchemaMode], ...]) -> dict[str, Any]:
    _, top = models_json_schema(models, ref_template=_REF)
    return dict(top.get("$defs", {}))


def schemas(operations: Iterable[Operation] | None = None) -> dict[str, Any]:
    """The component schemas: each request body's model in its validation form, each answer's
    in its serialization form (and every model they hold)."""
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for operation in declarations() if operations is None else operations:
        if operation.body is not None:
            wanted[(operation.body, "validation")] = None
        for reply in operation.responses.values():
            if isinstance(reply.body, type):
                wanted[(reply.body, "serialization")] = None
    return copy.deepcopy(_schemas(tuple(wanted)))


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _fields(model: type[BaseModel]) -> list[tuple[str, dict[str, Any], bool, str | None]]:
    """(name by alias, schema, required, description) per field of a parameter or header model,
    an optional field's schema without its null."""
    schema = model.model_json_schema(ref_template=_REF, mode="validation")
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        prop.pop("title", None)
        description = prop.pop("description", None)
        variants = [v for v in prop.pop("anyOf", []) if v.get("type") != "null"]
        prop.update(variants[0] if variants else {})
        if prop.get("default", ...) is None:  # an absent header, not a null one
            del prop["default"]
        out.append((name, prop, name in required, description))
    return out


def _parameters(model: type[BaseModel], where: str) -> list[dict[str, Any]]:
    """One OpenAPI parameter per field of a path, query or header model."""
    out = []
    for name, schema, required, description in _fields(model):
        param: dict[str, Any] = {"name": name, "in": where, "required": required}
        param |= {"description": description} if description else {}
        param |= {"schema": schema}
        param |= {"explode": True} if schema.get("type") == "array" else {}
        out.append(param)
    return out


def _reply(reply: Reply) -> dict[str, Any]:
    out: dict[str, Any] = {"description": reply.description}
    if reply.headers is not None:
        out["headers"] = {
            name: {"required": required, "schema": schema}
            for name, schema, required, _ in _fields(reply.headers)
        }
    if reply.body is None:
        out["content"] = {reply.media: {}}
    else:
        body = _ref(reply.body) if isinstance(reply.body, type) else dict(reply.body)
        out["content"] = {reply.media: {"schema": body}}
    return out


def operation_object(operation: Operation) -> dict[str, Any]:
    """The declaration as an OpenAPI operation object."""
    out: dict[str, Any] = {}
    if operation.operation_id is not None:
        out["operationId"] = operation.operation_id
    out |= {"summary": operation.summary, "tags": [operation.tag]}
    if operation.public:
        out["security"] = []
    elif operation.scope is not None:
        out["security"] = [{"bearer": [operation.scope.value]}]
    parameters = [
        *(_parameters(operation.path_params, "path") if operation.path_params else []),
        *(_parameters(operation.query, "query") if operation.query else []),
        *(_parameters(operation.headers, "header") if operation.headers else []),
    ]
    if parameters:
        out["parameters"] = parameters
    if operation.body is not None:
        out["requestBody"] = {"required": True, "content": {JSON: {"schema": _ref(operation.body)}}}
    out["responses"] = {str(status): _reply(reply) for status, reply in operation.responses.items()}
    return out


def paths(app: Flask) -> dict[str, Any]:
    """The document's paths: every declared operation the app serves, in declaration order."""
    routes = served(app)
    out: dict[str, Any] = {}
    for operation in declarations():
        if operation.key in routes:
            out.setdefault(operation.path, {})[operation.method] = operation_object(operation)
    return out


def document(app: Flask, public_url: str = "") -> dict[str, Any]:
    """The OpenAPI document of the app's routes, with this deployment's URL as its server."""
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "gitops-bot",
            "version": "1",
            "description": "A GitOps change bot: request a change, the bot carries it through "
            "approval, merge request, checks, merge and deployment. Errors are JSON "
            "`{error, detail}` with a short stable `error` code. Generated from the API's "
            "models.",
        },
        "paths": paths(app),
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": SCOPES_TEXT}
            },
        },
        "security": [{"bearer": []}],
    }
    if public_url:
        doc["servers"] = [{"url": public_url.rstrip("/")}]
    return doc
