"""Bearer-token authentication of /api/v1: constant-time, fail closed, never echoed."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from tests.api import Api, change_body

ROUTES = [
    ("POST", "/api/v1/changes"),
    ("GET", "/api/v1/changes"),
    ("GET", "/api/v1/changes/00000000-0000-0000-0000-000000000000"),
    ("POST", "/api/v1/changes/00000000-0000-0000-0000-000000000000/retry"),
    ("POST", "/api/v1/changes/00000000-0000-0000-0000-000000000000/cancel"),
]


@pytest.fixture
def api(db: Engine) -> Api:
    """The app with token "t" (the tests below override it where they need another)."""
    return Api.build(db)


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_missing_token_is_401_on_every_route(api: Api, method: str, path: str) -> None:
    """A request without Authorization is refused with 401 unauthorized on every API route."""
    response = api.call(method, path, json=change_body(), token=None)
    assert response.status_code == 401
    assert response.json is not None
    assert response.json["error"] == "unauthorized"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_wrong_token_is_401_and_not_echoed(db: Engine) -> None:
    """A wrong token is refused and neither it nor the right one appears in the answer."""
    api = Api.build(db, api_token="s3cret-token")
    response = api.submit(change_body(), token="wrong-token")
    assert response.status_code == 401
    assert b"s3cret-token" not in response.data
    assert b"wrong-token" not in response.data


def test_token_one_character_off_is_401(db: Engine) -> None:
    """A token differing in its last character only is refused; the exact one is accepted."""
    api = Api.build(db, api_token="abcdef123456")
    assert api.submit(change_body(), token="abcdef123457").status_code == 401
    assert api.submit(change_body(), token="abcdef12345").status_code == 401
    assert api.submit(change_body(), token="abcdef123456").status_code == 202


def test_empty_configured_token_refuses_everything(db: Engine) -> None:
    """With no GITOPS_API_TOKEN every request is refused, an empty bearer included."""
    api = Api.build(db, api_token="")
    assert api.submit(change_body(), token="").status_code == 401
    assert api.submit(change_body(), token=None).status_code == 401
    assert api.call("GET", "/api/v1/changes", token="anything").status_code == 401


def test_other_schemes_are_refused(api: Api) -> None:
    """Basic auth or a bare token in Authorization is not a bearer token."""
    for header in ("Basic dDp0", "t", "Bearer", "Token t"):
        response = api.call("GET", "/api/v1/changes", token=None, headers={"Authorization": header})
        assert response.status_code == 401, header


def test_bearer_scheme_is_case_insensitive(api: Api) -> None:
    """`bearer t` is accepted like `Bearer t` (RFC 7235: the scheme is case-insensitive)."""
    response = api.call("GET", "/api/v1/changes", token=None, headers={"Authorization": "bearer t"})
    assert response.status_code == 200


def test_openapi_document_needs_no_token(api: Api) -> None:
    """The OpenAPI document is public: it holds no secret and client generators fetch it."""
    assert api.call("GET", "/api/v1/openapi.json", token=None).status_code == 200
