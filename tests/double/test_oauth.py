"""The GitLab double as an OAuth 2.0 provider, as GitLab documents it (doc/api/oauth2.md):
authorize, token (with PKCE), and what an OAuth token may read."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from sim.gitlab import GitLabDouble
from tests.double import Clock

GITLAB = "https://gitlab.example.com"
CALLBACK = "http://bot.test/auth/callback"
VERIFIER = "ks02i3jdikdo2k0dkfodf3m39rjfjsdk0wk349rj3jrhf"


@pytest.fixture
def double(clock: Clock) -> Iterator[GitLabDouble]:
    """GitLab with one project, alice signed in, and the dashboard's OAuth application."""
    gitlab = GitLabDouble(GITLAB, clock=clock)
    gitlab.add_project("platform/config")
    gitlab.add_user("alice", token="alice-pat")
    gitlab.add_oauth_app("app", "app-secret", CALLBACK)
    gitlab.oauth_sign_in("alice")
    with gitlab.mocked(GITLAB):
        yield gitlab


def challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def authorize(**overrides: str | None) -> requests.Response:
    """GET /oauth/authorize with the app's parameters (None leaves one out)."""
    query: dict[str, Any] = {
        "client_id": "app",
        "redirect_uri": CALLBACK,
        "response_type": "code",
        "state": "s-1",
        "scope": "read_user",
        "code_challenge": challenge(VERIFIER),
        "code_challenge_method": "S256",
    }
    query.update(overrides)
    kept = {k: v for k, v in query.items() if v is not None}
    return requests.get(f"{GITLAB}/oauth/authorize?{urlencode(kept)}", allow_redirects=False)


def code_of(response: requests.Response) -> str:
    assert response.status_code == 302, response.text
    query = parse_qs(urlsplit(response.headers["Location"]).query)
    assert query["state"] == ["s-1"]
    return query["code"][0]


def token(grant: str, **overrides: str | None) -> requests.Response:
    """POST /oauth/token for the code, form-encoded as GitLab takes it."""
    form: dict[str, Any] = {
        "client_id": "app",
        "client_secret": "app-secret",
        "code": grant,
        "grant_type": "authorization_code",
        "redirect_uri": CALLBACK,
        "code_verifier": VERIFIER,
    }
    form.update(overrides)
    return requests.post(f"{GITLAB}/oauth/token", data={k: v for k, v in form.items() if v})


def test_the_pkce_example_of_gitlabs_documentation(double: GitLabDouble) -> None:
    """The challenge of the documented verifier is the documented one, and a code bought with it
    becomes a bearer token that reads GET /api/v4/user as alice."""
    assert challenge(VERIFIER) == "2i0WFA-0AerkjQm4X4oDEhqA17QIAKNjXpagHBXmO_U"
    answer = token(code_of(authorize()))
    assert answer.status_code == 200
    body = answer.json()
    assert (body["token_type"], body["expires_in"], body["scope"]) == ("Bearer", 7200, "read_user")
    me = requests.get(
        f"{GITLAB}/api/v4/user", headers={"Authorization": f"Bearer {body['access_token']}"}
    )
    assert me.status_code == 200
    assert me.json()["username"] == "alice"


def test_a_code_is_good_once(double: GitLabDouble) -> None:
    """The second exchange of a code is 400 invalid_grant; one token was issued."""
    code = code_of(authorize())
    assert token(code).status_code == 200
    again = token(code)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")
    assert double.oauth_tokens_issued() == 1


@pytest.mark.parametrize(
    "change",
    [
        {"code_verifier": "x" * 43},
        {"code_verifier": None},
        {"redirect_uri": "http://evil.test/cb"},
        {"code": "not-a-code"},
    ],
    ids=["another verifier", "no verifier", "another redirect URI", "unknown code"],
)
def test_a_code_is_only_for_its_verifier_and_redirect(
    double: GitLabDouble, change: dict[str, str | None]
) -> None:
    """PKCE and the redirect URI bind the code: anything else is 400 invalid_grant."""
    answer = token(code_of(authorize()), **change)
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_grant")


def test_a_code_expires_after_ten_minutes(double: GitLabDouble, clock: Clock) -> None:
    """Exchanged more than 600 s after it was issued, the code is invalid_grant."""
    code = code_of(authorize())
    clock.advance(601)
    assert token(code).json()["error"] == "invalid_grant"


def test_a_wrong_client_secret_is_invalid_client(double: GitLabDouble) -> None:
    """401 invalid_client for a secret that is not the application's."""
    answer = token(code_of(authorize()), client_secret="guess")
    assert (answer.status_code, answer.json()["error"]) == (401, "invalid_client")


def test_authorize_never_redirects_to_an_unregistered_uri(double: GitLabDouble) -> None:
    """An unknown application or redirect URI is an error page, not a redirect; a scope the
    application lacks comes back to it as invalid_scope."""
    assert authorize(client_id="other").status_code == 400
    assert authorize(redirect_uri="http://evil.test/cb").status_code == 400
    scoped = authorize(scope="api")
    assert scoped.status_code == 302
    assert parse_qs(urlsplit(scoped.headers["Location"]).query)["error"] == ["invalid_scope"]


def test_nobody_signed_in_goes_to_the_sign_in_page(double: GitLabDouble) -> None:
    """Without a GitLab session the browser is sent to GitLab's sign-in page, with no code."""
    double.oauth_sign_in(None)
    answer = authorize()
    assert answer.status_code == 302
    assert answer.headers["Location"] == f"{GITLAB}/users/sign_in"


def test_a_read_user_token_reads_nothing_else(double: GitLabDouble) -> None:
    """With only `read_user`, GET /projects/... is 403 insufficient_scope."""
    access = token(code_of(authorize())).json()["access_token"]
    answer = requests.get(
        f"{GITLAB}/api/v4/projects/platform%2Fconfig",
        headers={"Authorization": f"Bearer {access}"},
    )
    assert (answer.status_code, answer.json()["error"]) == (403, "insufficient_scope")
