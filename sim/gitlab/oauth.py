"""GitLab as an OAuth 2.0 identity provider, in the double: `/oauth/authorize` and `/oauth/token`
(authorization code, with PKCE), and the access tokens they issue, which `GET /api/v4/user`
takes as `Authorization: Bearer`.

As GitLab documents it (gitlabhq doc/api/oauth2.md; GitLab runs the doorkeeper gem):

- `/oauth/authorize?client_id&redirect_uri&response_type=code&state&scope&code_challenge&
  code_challenge_method=S256` redirects the browser back to `redirect_uri?code=...&state=...`
  for the user signed in to GitLab (`oauth_sign_in` sets who; nobody: the sign-in page). An
  unknown application or a redirect URI it did not register is an error page, never a redirect;
  a scope it was not given comes back as `error=invalid_scope`.
- `POST /oauth/token` (form: client_id, client_secret, code, grant_type=authorization_code,
  redirect_uri, code_verifier) answers `{access_token, token_type, expires_in, refresh_token,
  scope, created_at}`. A code is good once and for ten minutes, for its application and redirect
  URI, and with PKCE only with the verifier whose S256 hash was the challenge; anything else is
  400 `invalid_grant`. A wrong client secret is 401 `invalid_client`.
- A token with only `read_user` reads `GET /user` and nothing else: 403 `insufficient_scope`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from werkzeug.wrappers import Request, Response

from .errors import ApiError

if TYPE_CHECKING:
    from .state import State

#: doorkeeper's authorization_code_expires_in as GitLab sets it.
CODE_SECONDS = 600
#: GitLab's access token lifetime (doc/api/oauth2.md's example answers).
TOKEN_SECONDS = 7200
#: What a token may call with only `read_user` (lib/api/users.rb: GET /user allows it).
READ_USER_ROUTES = {("GET", "/user")}
_INVALID_GRANT = (
    "The provided authorization grant is invalid, expired, revoked, does not match the "
    "redirection URI used in the authorization request, or was issued to another client."
)
_INVALID_CLIENT = (
    "Client authentication failed due to unknown client, no client authentication included, "
    "or unsupported authentication method."
)


@dataclass
class OAuthApp:
    """An application registered in GitLab (Admin or user settings, Applications)."""

    client_id: str
    secret: str
    redirect_uri: str
    scopes: tuple[str, ...] = ("read_user",)


@dataclass
class Grant:
    """An authorization code, as issued."""

    client_id: str
    user_id: int
    redirect_uri: str
    scopes: tuple[str, ...]
    challenge: str | None
    method: str | None
    expires_at: datetime
    used: bool = False


@dataclass
class OAuthState:
    """Applications, codes and tokens; who is signed in to GitLab in "the browser"."""

    apps: dict[str, OAuthApp] = field(default_factory=dict)
    grants: dict[str, Grant] = field(default_factory=dict)
    #: access token -> (user id, scopes)
    tokens: dict[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    signed_in: int | None = None

    def user_id(self, token: str) -> int | None:
        """The user an OAuth access token belongs to."""
        found = self.tokens.get(token)
        return None if found is None else found[0]


def _oauth_error(status: int, error: str, description: str) -> ApiError:
    return ApiError(status, None, error=error, error_description=description)


def check_scope(state: State, token: str | None, method: str, api_path: str) -> None:
    """403 `insufficient_scope` for an OAuth token whose scopes do not allow the call."""
    found = state.oauth.tokens.get(token or "")
    if found is None or {"api", "read_api"} & set(found[1]):
        return
    if (method if method != "HEAD" else "GET", api_path.rstrip("/")) not in READ_USER_ROUTES:
        raise ApiError(
            403,
            None,
            error="insufficient_scope",
            error_description="The request requires higher privileges than provided by the "
            "access token.",
            scope="api read_api",
        )


def answer(state: State, lock: threading.RLock, request: Request, path: str) -> Response:
    """The double's answer to one `/oauth/...` request."""
    with lock:
        try:
            if request.method == "GET" and path == "/oauth/authorize":
                return _authorize(state, request)
            if request.method == "POST" and path == "/oauth/token":
                return _json(200, _token(state, request.form.to_dict(flat=True)))
            raise ApiError(404, "404 Not Found")
        except ApiError as error:
            return _json(error.status, error.body())


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _authorize(state: State, request: Request) -> Response:
    args = request.args
    app = state.oauth.apps.get(args.get("client_id", ""))
    if app is None or args.get("redirect_uri") != app.redirect_uri:
        # doorkeeper shows an error page: it never redirects to a URI it cannot trust
        raise _oauth_error(400, "invalid_client" if app is None else "invalid_redirect_uri", "")
    back: dict[str, str] = {"state": args["state"]} if "state" in args else {}
    scopes = tuple((args.get("scope") or "").split())
    if args.get("response_type") != "code":
        back["error"] = "unsupported_response_type"
    elif not scopes or not set(scopes) <= set(app.scopes):
        back["error"] = "invalid_scope"
    elif args.get("code_challenge_method", "plain") not in {"plain", "S256"}:
        back["error"] = "invalid_request"
    if "error" in back:
        return Response(status=302, headers={"Location": _with(app.redirect_uri, back)})
    if state.oauth.signed_in is None:
        return Response(status=302, headers={"Location": f"{state.web_url}/users/sign_in"})
    code = secrets.token_hex(32)
    state.oauth.grants[code] = Grant(
        client_id=app.client_id,
        user_id=state.oauth.signed_in,
        redirect_uri=app.redirect_uri,
        scopes=scopes,
        challenge=args.get("code_challenge"),
        method=args.get("code_challenge_method", "plain") if args.get("code_challenge") else None,
        expires_at=state.clock() + timedelta(seconds=CODE_SECONDS),
    )
    location = _with(app.redirect_uri, {"code": code, **back})
    return Response(status=302, headers={"Location": location})


def _with(uri: str, query: dict[str, str]) -> str:
    return f"{uri}{'&' if '?' in uri else '?'}{urlencode(query)}"


def _token(state: State, form: dict[str, str]) -> dict[str, Any]:
    if form.get("grant_type") != "authorization_code":
        raise _oauth_error(
            400, "unsupported_grant_type", "The authorization grant type is not supported."
        )
    app = state.oauth.apps.get(form.get("client_id", ""))
    secret = form.get("client_secret")
    if app is None or (secret is not None and not secrets.compare_digest(secret, app.secret)):
        raise _oauth_error(401, "invalid_client", _INVALID_CLIENT)
    grant = state.oauth.grants.get(form.get("code", ""))
    if (
        grant is None
        or grant.used
        or grant.client_id != app.client_id
        or grant.redirect_uri != form.get("redirect_uri")
        or grant.expires_at <= state.clock()
        or not _verifier_ok(grant, form.get("code_verifier"))
        or (secret is None and grant.challenge is None)  # a confidential app without PKCE
    ):
        raise _oauth_error(400, "invalid_grant", _INVALID_GRANT)
    grant.used = True
    token = secrets.token_hex(32)
    state.oauth.tokens[token] = (grant.user_id, grant.scopes)
    return {
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": TOKEN_SECONDS,
        "refresh_token": secrets.token_hex(32),
        "scope": " ".join(grant.scopes),
        "created_at": int(state.clock().timestamp()),
    }


def _verifier_ok(grant: Grant, verifier: str | None) -> bool:
    """PKCE (RFC 7636 4.6): the verifier matches the challenge the code was issued for."""
    if grant.challenge is None:
        return True
    if not verifier:
        return False
    if grant.method == "S256":
        digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
        computed = base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
        return secrets.compare_digest(computed, grant.challenge)
    return secrets.compare_digest(verifier, grant.challenge)


class OAuthMixin:
    """The double's OAuth provider, seeded and steered by tests."""

    state: State
    lock: threading.RLock

    def add_oauth_app(
        self,
        client_id: str,
        secret: str,
        redirect_uri: str,
        scopes: tuple[str, ...] = ("read_user",),
    ) -> OAuthApp:
        """Registers an OAuth application (its id, secret, one redirect URI and its scopes)."""
        with self.lock:
            app = OAuthApp(client_id, secret, redirect_uri, scopes)
            self.state.oauth.apps[client_id] = app
            return app

    def oauth_sign_in(self, username: str | None) -> None:
        """Who is signed in to GitLab in "the browser" `/oauth/authorize` answers (None: no
        one, which sends the browser to GitLab's sign-in page)."""
        with self.lock:
            user = None if username is None else self.state.user_named(username)
            self.state.oauth.signed_in = None if user is None else user.id

    def oauth_tokens_issued(self) -> int:
        """How many access tokens `/oauth/token` has issued."""
        with self.lock:
            return len(self.state.oauth.tokens)
