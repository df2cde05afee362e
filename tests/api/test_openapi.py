"""The OpenAPI document and the app's routes describe the same service, in both directions: the
document's paths are generated from the routes' declarations (webhooks/api_contract.py), and a
route without a declaration, or a declaration without a route, fails here."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Blueprint, Flask
from sqlalchemy.engine import Engine

import webhooks.api
from tests.api import PUBLIC_URL, Api
from webhooks.api_contract import Operation, Routes, drift
from webhooks.openapi import declarations, document

_METHODS = {"get", "put", "post", "delete", "patch"}
_IGNORED = {"HEAD", "OPTIONS"}


@pytest.fixture
def api(db: Engine) -> Api:
    """The app on the test database."""
    return Api.build(db)


def app_routes(app: Flask) -> set[tuple[str, str]]:
    """(method, OpenAPI-style path) for every route but `static`; `<x>`/`<conv:x>` become `{x}`."""
    routes = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        routes.update((method.lower(), path) for method in (rule.methods or set()) - _IGNORED)
    return routes


def documented_routes(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(method, path) for every operation in the document."""
    return {
        (method, path)
        for path, item in doc["paths"].items()
        for method in item
        if method in _METHODS
    }


def test_every_route_is_declared_and_every_declaration_is_served(api: Api) -> None:
    """Each app route has one declaration and each declaration's route is served."""
    found = drift(api.app, declarations())
    assert found.undeclared == set(), "routes without a declaration (webhooks/api_contract.py)"
    assert found.unrouted == set(), "declarations of routes the app does not serve"


def test_the_document_is_every_route_of_the_app(api: Api) -> None:
    """The document's operations are exactly the app's routes, methods included."""
    assert documented_routes(document(api.app)) == app_routes(api.app)


def test_a_route_without_a_declaration_is_drift(api: Api) -> None:
    """A route added the plain Flask way is named as undeclared (and left out of the
    document, so the tests above fail on it)."""

    @api.app.get("/api/v1/undocumented/<int:n>")
    def undocumented(n: int) -> str:
        return str(n)

    found = drift(api.app, declarations())
    assert found.undeclared == {("get", "/api/v1/undocumented/{n}")}
    assert ("get", "/api/v1/undocumented/{n}") not in documented_routes(document(api.app))
    assert documented_routes(document(api.app)) != app_routes(api.app)


def test_a_declaration_without_a_route_is_drift(api: Api) -> None:
    """A declared route on a blueprint the app never registers, a declaration left behind by a
    removed route, and the same operation declared twice are named as unrouted."""
    ghosts: list[Operation] = []
    routes = Routes(Blueprint("ghost", __name__, url_prefix="/api/v1"), registry=ghosts)

    @routes.get("/ghost", summary="Nobody serves this.", tag="meta", responses={})
    def ghost() -> str:
        return ""

    left_behind = Operation("delete", "/api/v1/queues", "Gone.", "queues", {})
    twice = webhooks.api.routes.registry[0]
    found = drift(api.app, (*declarations(), *ghosts, left_behind, twice))
    assert found.unrouted == {("get", "/api/v1/ghost"), ("delete", "/api/v1/queues"), twice.key}
    assert found.undeclared == set()
    assert "/api/v1/ghost" not in document(api.app)["paths"]


def test_only_the_document_is_public_in_the_api(api: Api) -> None:
    """The declarations' `public` is what the API's authentication lets through: the document
    alone, and with `security: []` in it."""
    public = {
        (method, path)
        for path, item in document(api.app)["paths"].items()
        for method, op in item.items()
        if path.startswith("/api/") and op.get("security") == []
    }
    assert public == {("get", "/api/v1/openapi.json")}
    assert api.call("GET", "/api/v1/openapi.json", token=None).status_code == 200
    assert api.call("GET", "/api/v1/queues", token=None).status_code == 401


def test_the_answers_headers_are_declared_with_their_status(api: Api) -> None:
    """The headers an answer always carries are in the document at their status, from the
    declaration's header model, and the app sends them."""
    create = document(api.app)["paths"]["/api/v1/changes"]["post"]
    headers = {
        status: set(answer["headers"])
        for status, answer in create["responses"].items()
        if "headers" in answer
    }
    assert headers == {"202": {"Location"}, "401": {"WWW-Authenticate"}, "503": {"Retry-After"}}
    assert create["responses"]["503"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
    assert "WWW-Authenticate" in api.submit({}, token=None).headers


def test_document_is_served_with_this_server(api: Api) -> None:
    """GET /api/v1/openapi.json serves OpenAPI 3.1 naming the public URL as its server."""
    response = api.call("GET", "/api/v1/openapi.json")
    assert response.status_code == 200
    doc = response.json
    assert doc is not None
    assert doc["openapi"].startswith("3.1")
    assert doc["servers"] == [{"url": PUBLIC_URL}]


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_document_is_well_formed(api: Api) -> None:
    """Every operation has responses, path parameters are declared, and every $ref resolves."""
    doc = document(api.app)
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[1] in schemas, ref
    operation_ids = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert method in _METHODS
            assert op["responses"], (method, path)
            operation_ids += [op["operationId"]] if "operationId" in op else []
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert declared == set(re.findall(r"{(\w+)}", path)), (method, path)
    assert len(operation_ids) == len(set(operation_ids))


def test_error_codes_in_the_api_are_documented(api: Api) -> None:
    """Every error code webhooks/api.py can answer appears in the document's descriptions."""
    from pathlib import Path

    import webhooks.api
    import webhooks.api_auth
    import webhooks.api_body
    import webhooks.api_submit

    modules = (webhooks.api, webhooks.api_body, webhooks.api_auth, webhooks.api_submit)
    source = "".join(Path(module.__file__ or "").read_text() for module in modules)
    codes = set(re.findall(r'ApiError\(\s*\d{3},\s*"(\w+)"', source)) | {"invalid"}
    text = str(document(api.app))
    assert codes
    missing = {code for code in codes if f"`{code}`" not in text}
    assert missing == set()


#: The scope each REST operation needs (README, "The REST API").
SCOPES = {
    "createChange": "submit",
    "listChanges": "read",
    "getChange": "read",
    "listQueues": "read",
    "retryChange": "operate",
    "cancelChange": "operate",
    "promoteChange": "admin",
}


def test_every_api_operation_names_its_scope(api: Api) -> None:
    """Each non-public REST operation's `security` names the one scope its route checks, and
    answers 403 as documented; the bearer scheme says what the scopes mean."""
    doc = document(api.app)
    found = {
        op["operationId"]: op["security"]
        for path, item in doc["paths"].items()
        for op in item.values()
        if path.startswith("/api/") and op["operationId"] != "openapi"
    }
    assert found == {name: [{"bearer": [scope]}] for name, scope in SCOPES.items()}
    for path, item in doc["paths"].items():
        for op in item.values():
            if path.startswith("/api/") and op.get("security"):
                assert "403" in op["responses"], op["operationId"]
                assert "insufficient_scope" in op["responses"]["403"]["description"]
    described = doc["components"]["securitySchemes"]["bearer"]["description"]
    assert all(f"`{scope}`" in described for scope in set(SCOPES.values()))
