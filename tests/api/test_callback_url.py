"""POST /api/v1/changes with a callback_url: only to an allowed host, only with a secret."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from tests.api import Api, change_body
from tests.builders import operation

HOOK = "https://hooks.example.com/gitops?token=receiver-own"


@pytest.fixture
def api(db: Engine) -> Api:
    """The app with one allowed HTTPS host, one allowed plain-HTTP host:port and a secret."""
    return Api.build(
        db,
        callback_hosts=("hooks.example.com", "http://portal.internal:8080"),
        callback_secret="callback-secret",
    )


def test_an_allowed_callback_url_is_stored_on_the_operation(api: Api) -> None:
    """A URL on a listed host is accepted (202) and kept on the operation, query and all."""
    response = api.submit(change_body(callback_url=HOOK))
    assert response.status_code == 202
    assert response.json is not None
    assert operation(api.engine, response.json["operation_id"])["callback_url"] == HOOK


def test_plain_http_only_for_a_host_listed_with_http(api: Api) -> None:
    """`http://portal.internal:8080` allows http there; hooks.example.com is HTTPS only."""
    assert api.submit(change_body(callback_url="http://portal.internal:8080/cb")).status_code == 202
    refused = api.submit(change_body(callback_url="http://hooks.example.com/gitops"))
    assert refused.status_code == 422
    assert refused.json is not None
    assert refused.json["error"] == "callback_not_allowed"
    assert "another scheme or port" in refused.json["detail"]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://evil.example.com/x", "evil.example.com is not listed in GITOPS_CALLBACK_HOSTS"),
        ("https://hooks.example.com.evil.example/x", "is not listed in GITOPS_CALLBACK_HOSTS"),
        ("https://hooks.example.com:8443/x", "another scheme or port"),
        ("https://user:pw@hooks.example.com/x", "must not carry a user name or password"),
        ("https://127.0.0.1/x", "names an IP address"),
        ("https://2130706433/x", "names an IP address"),
        ("https://0x7f.1/x", "names an IP address"),
        ("https://[::1]/x", "names an IP address"),
        ("file:///etc/passwd", "must be an https:// URL"),
        ("gopher://hooks.example.com/", "must be an https:// URL"),
        ("https://hooks.example.com\\@evil.example/", "backslashes"),
        ("https://hooks.example.com/x#frag", "#fragment"),
        ("not a url", "without spaces"),
    ],
)
def test_a_callback_url_off_the_list_is_refused_naming_why(api: Api, url: str, why: str) -> None:
    """Anything but an exact listed host (and port, and scheme) is 422 callback_not_allowed."""
    response = api.submit(change_body(callback_url=url))
    assert response.status_code == 422
    body = response.json
    assert body is not None
    assert body["error"] == "callback_not_allowed"
    assert body["field"] == "callback_url"
    assert why in body["detail"]
    assert api.queue.enqueued == []


def test_no_secret_no_callback(db: Engine) -> None:
    """Without GITOPS_CALLBACK_SECRET any callback_url is refused, saying so."""
    api = Api.build(db, callback_hosts=("hooks.example.com",))
    response = api.submit(change_body(callback_url=HOOK))
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["error"] == "callback_not_allowed"
    assert "no callback secret" in response.json["detail"]
    assert api.submit(change_body()).status_code == 202  # without one: as before


def test_a_different_callback_url_under_the_same_key_is_a_different_request(api: Api) -> None:
    """The Idempotency-Key is bound to the whole body: another callback_url is refused."""
    body = change_body(callback_url=HOOK)
    key = {"Idempotency-Key": "k-1"}
    first = api.submit(body, headers=key)
    assert first.status_code == 202
    assert first.json is not None
    again = api.submit(body, headers=key)
    assert again.json is not None
    assert again.json["operation_id"] == first.json["operation_id"]
    other = api.submit({**body, "callback_url": "https://hooks.example.com/other"}, headers=key)
    assert other.status_code == 422
    assert other.json is not None
    assert other.json["error"] == "idempotency_key_reused"
