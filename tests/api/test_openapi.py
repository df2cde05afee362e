"""The OpenAPI document and the app's routes describe the same service, in both directions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from sqlalchemy.engine import Engine

from tests.api import PUBLIC_URL, Api
from webhooks.openapi import document

#: Documented ahead of the routes: the webhook receivers are built by other work. While a path is
#: absent from app.url_map its entry may stand alone; once the route exists it is checked like
#: every other (method included), so the test is honest now and strict once they land.
DOCUMENTED_AHEAD = {"/webhooks/gitlab", "/webhooks/approval", "/webhooks/deploy"}

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


def test_every_route_is_documented_and_every_entry_exists(api: Api) -> None:
    """Each app route is in the document and each documented operation is served by the app."""
    served = app_routes(api.app)
    documented = documented_routes(document())
    served_paths = {path for _, path in served}
    assert served - documented == set(), "routes missing from webhooks/openapi.py"
    ahead = {(m, p) for m, p in documented - served if p in DOCUMENTED_AHEAD}
    assert all(p not in served_paths for _, p in ahead)
    assert documented - served - ahead == set(), "documented operations the app does not serve"


def test_route_comparison_catches_drift(api: Api) -> None:
    """A route added without an entry, or an entry without its route, is noticed."""

    @api.app.get("/api/v1/undocumented/<int:n>")
    def undocumented(n: int) -> str:
        return str(n)

    assert ("get", "/api/v1/undocumented/{n}") in app_routes(api.app) - documented_routes(
        document()
    )
    doc = document()
    doc["paths"]["/api/v1/ghost"] = {"get": {"responses": {"200": {"description": "none"}}}}
    assert ("get", "/api/v1/ghost") in documented_routes(doc) - app_routes(api.app)


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


def test_document_is_well_formed() -> None:
    """Every operation has responses, path parameters are declared, and every $ref resolves."""
    doc = document()
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


def test_error_codes_in_the_api_are_documented() -> None:
    """Every error code webhooks/api.py can answer appears in the document's descriptions."""
    from pathlib import Path

    import webhooks.api
    import webhooks.api_body

    source = "".join(
        Path(module.__file__ or "").read_text() for module in (webhooks.api, webhooks.api_body)
    )
    codes = set(re.findall(r'ApiError\(\s*\d{3},\s*"(\w+)"', source)) | {"invalid"}
    text = str(document())
    assert codes
    missing = {code for code in codes if f"`{code}`" not in text}
    assert missing == set()
