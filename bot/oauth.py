"""GitLab as the dashboard's identity provider (an adapter, like bot/gitlab's, for the
sign-in's own calls): the OAuth 2.0 authorization code flow with PKCE as GitLab documents it
(gitlabhq doc/api/oauth2.md: `/oauth/authorize`, `/oauth/token` with `code_verifier`), then
`GET /api/v4/user` with the user's token, which is used for nothing else and never kept.

Who may then see the dashboard is webhooks/dashboard_access.py's `admitted`.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import requests

from bot.config import Settings

#: Where GitLab sends the browser back (registered with the OAuth application).
CALLBACK_PATH = "/auth/callback"
#: All the bot asks of the user's account: who they are.
SCOPE = "read_user"


class SignInFailed(Exception):
    """The sign-in cannot go on: the status to answer and why, in words for the person."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class GitLabUser:
    """The signed-in GitLab account."""

    user_id: int
    username: str


def redirect_uri(settings: Settings) -> str:
    """The callback URL GitLab redirects to (registered with the application)."""
    return settings.public_url.rstrip("/") + CALLBACK_PATH


def pkce_pair() -> tuple[str, str]:
    """A fresh PKCE verifier (64 URL-safe characters) and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def authorize_url(settings: Settings, state: str, challenge: str) -> str:
    """Where the browser goes to sign in at GitLab."""
    query = {
        "client_id": settings.oauth_client_id,
        "redirect_uri": redirect_uri(settings),
        "response_type": "code",
        "state": state,
        "scope": SCOPE,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return f"{settings.gitlab_url}/oauth/authorize?{urlencode(query)}"


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def exchange(settings: Settings, code: str, verifier: str) -> str:
    """The user's access token for the code (one POST /oauth/token); SignInFailed when GitLab
    refuses the code (used already, expired, another verifier) or cannot be reached."""
    form = {
        "client_id": settings.oauth_client_id,
        "client_secret": settings.oauth_client_secret,
        "code": code,
        "grant_type": "authorization_code",
        "redirect_uri": redirect_uri(settings),
        "code_verifier": verifier,
    }
    try:
        response = requests.post(
            f"{settings.gitlab_url}/oauth/token",
            data=form,
            headers={"Accept": "application/json"},
            timeout=settings.gitlab_timeout,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        raise SignInFailed(502, f"GitLab could not be reached ({type(exc).__name__})") from None
    data = _json(response)
    token = data.get("access_token")
    if response.status_code >= 500:
        raise SignInFailed(502, f"GitLab answered {response.status_code}")
    if response.status_code != 200 or not isinstance(token, str) or not token:
        # invalid_grant: a code used already, expired, or not this sign-in's (PKCE)
        error = data.get("error") if isinstance(data.get("error"), str) else "no token"
        raise SignInFailed(401, f"GitLab refused the sign-in ({str(error)[:64]}); try again")
    return token


def gitlab_user(settings: Settings, access_token: str) -> GitLabUser:
    """Who the token belongs to (one GET /api/v4/user)."""
    try:
        response = requests.get(
            f"{settings.gitlab_url}/api/v4/user",
            headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json"},
            timeout=settings.gitlab_timeout,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        raise SignInFailed(502, f"GitLab could not be reached ({type(exc).__name__})") from None
    data = _json(response)
    user_id, username = data.get("id"), data.get("username")
    if response.status_code != 200 or not isinstance(username, str) or not username:
        raise SignInFailed(502, f"GitLab did not say who signed in ({response.status_code})")
    if not isinstance(user_id, int) or isinstance(user_id, bool):
        raise SignInFailed(502, "GitLab did not say who signed in (no user id)")
    return GitLabUser(user_id, username)
