"""The dashboard's cookies after a GitLab sign-in (webhooks/signin.py): the session, and the
sign-in in progress (its `state` and PKCE verifier).

Both are signed (HMAC-SHA256 over the value and the moment it was signed) with a key derived
from GITOPS_OAUTH_CLIENT_SECRET through HMAC, one key per purpose, so every web instance with the
secret accepts the others' cookies and a cookie of one kind is never taken for the other.
HttpOnly, SameSite=Lax (sent when GitLab redirects back, never on another site's POST), Secure
when GITOPS_PUBLIC_URL is https. A session lasts SESSION_SECONDS; a sign-in must come back
within FLOW_SECONDS.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

from flask import Response

from bot.config import Settings

SESSION_COOKIE = "gitops_session"
FLOW_COOKIE = "gitops_signin"
#: How long a signed-in session lasts (then GitLab is asked again).
SESSION_SECONDS = 8 * 3600
#: How long a sign-in may take between leaving for GitLab and coming back.
FLOW_SECONDS = 600
#: The sign-in cookie is sent only to the sign-in routes.
FLOW_PATH = "/auth/"


def configured(settings: Settings) -> bool:
    """Whether GitLab sign-in is set up: the OAuth application's id and secret."""
    return bool(settings.oauth_client_id and settings.oauth_client_secret)


def _key(settings: Settings, purpose: str) -> bytes:
    """The signing key of one kind of cookie: HMAC(client secret, purpose)."""
    return hmac.new(
        settings.oauth_client_secret.encode("utf-8"),
        f"gitops-bot dashboard {purpose}".encode(),
        hashlib.sha256,
    ).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _dumps(settings: Settings, purpose: str, value: Any, now: float | None = None) -> str:
    """`<payload>.<signed at>.<signature>`, all URL-safe."""
    payload = _b64(json.dumps(value, separators=(",", ":")).encode("utf-8"))
    signed = f"{payload}.{int(now if now is not None else time.time())}"
    mac = hmac.new(_key(settings, purpose), signed.encode("ascii"), hashlib.sha256).digest()
    return f"{signed}.{_b64(mac)}"


def _loads(settings: Settings, purpose: str, cookie: str | None, max_age: int) -> Any:
    """The signed value, or None (no cookie, no sign-in configured, forged or expired)."""
    if not cookie or not configured(settings):
        return None
    signed, _, mac = cookie.rpartition(".")
    payload, _, at = signed.partition(".")
    try:
        given = _unb64(mac)
        expected = hmac.new(_key(settings, purpose), signed.encode("ascii"), hashlib.sha256)
        if not hmac.compare_digest(given, expected.digest()):
            return None
        # a minute of clock difference between web instances is allowed
        if not at.isdigit() or not -60 <= time.time() - int(at) <= max_age:
            return None
        return json.loads(_unb64(payload))
    except (ValueError, binascii.Error, UnicodeError):
        return None


def _set(response: Response, settings: Settings, name: str, value: str, **kw: Any) -> None:
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="Lax",
        secure=settings.public_url.startswith("https://"),
        **kw,
    )


@dataclass(frozen=True, slots=True)
class SignedIn:
    """Who a session belongs to: a GitLab user."""

    username: str
    user_id: int


def session_user(settings: Settings, cookie: str | None) -> SignedIn | None:
    """The GitLab user a valid session cookie names, or None."""
    value = _loads(settings, "session", cookie, SESSION_SECONDS)
    if not isinstance(value, dict):
        return None
    username, user_id = value.get("u"), value.get("i")
    if not isinstance(username, str) or not isinstance(user_id, int):
        return None
    return SignedIn(username, user_id)


def start_session(response: Response, settings: Settings, user: SignedIn) -> None:
    """Sets the session cookie for `user`."""
    value = _dumps(settings, "session", {"u": user.username, "i": user.user_id})
    _set(response, settings, SESSION_COOKIE, value, max_age=SESSION_SECONDS, path="/")


def end_session(response: Response, settings: Settings) -> None:
    """Removes the session cookie."""
    _set(response, settings, SESSION_COOKIE, "", max_age=0, expires=0, path="/")


def save_flow(response: Response, settings: Settings, state: str, verifier: str) -> None:
    """Keeps the sign-in's `state` and PKCE verifier until GitLab sends the browser back."""
    value = _dumps(settings, "signin", {"s": state, "v": verifier})
    _set(response, settings, FLOW_COOKIE, value, max_age=FLOW_SECONDS, path=FLOW_PATH)


def read_flow(settings: Settings, cookie: str | None) -> tuple[str, str] | None:
    """The sign-in's (state, verifier), or None (none started here, expired or forged)."""
    value = _loads(settings, "signin", cookie, FLOW_SECONDS)
    if not isinstance(value, dict):
        return None
    state, verifier = value.get("s"), value.get("v")
    if not isinstance(state, str) or not isinstance(verifier, str):
        return None
    return state, verifier


def clear_flow(response: Response, settings: Settings) -> None:
    """Removes the sign-in cookie (a code and state are good for one try)."""
    _set(response, settings, FLOW_COOKIE, "", max_age=0, expires=0, path=FLOW_PATH)
