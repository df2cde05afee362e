"""Signing in to the dashboard with GitLab, and out: `/auth/login`, `/auth/callback`,
`/auth/logout` (HTML, the dashboard's security headers).

`login` sends the browser to GitLab's `/oauth/authorize` with a fresh `state` and PKCE
challenge, both kept in a signed, short-lived cookie (webhooks/session.py); `callback` takes
GitLab's answer only with that cookie and the same `state` (compared in constant time), trades
the code for a token with the verifier (a code is good once) and reads who signed in (GitLab's
calls: bot/oauth.py), lets them in if they may see the dashboard (webhooks/dashboard_access.py)
and sets the session cookie. Every refusal is a page saying why, and sets no session. Without
GITOPS_OAUTH_CLIENT_ID and GITOPS_OAUTH_CLIENT_SECRET the routes answer 404.
"""

from __future__ import annotations

import hmac
import logging
import secrets

from flask import Blueprint, Response, request
from pydantic import BaseModel, ConfigDict, Field

from bot import oauth
from bot.oauth import SignInFailed
from webhooks.context import services_of
from webhooks.dashboard_access import admitted
from webhooks.pages import render, secured
from webhooks.session import (
    FLOW_COOKIE,
    SignedIn,
    clear_flow,
    configured,
    end_session,
    read_flow,
    save_flow,
    start_session,
)

log = logging.getLogger(__name__)

bp = Blueprint("signin", __name__, url_prefix="/auth")

#: What the 404 page says when GitLab sign-in is not set up.
NOT_CONFIGURED = (
    "Signing in with GitLab is not set up on this bot (GITOPS_OAUTH_CLIENT_ID and "
    "GITOPS_OAUTH_CLIENT_SECRET)."
)


class CallbackQuery(BaseModel):
    """What GitLab sends the browser back with (RFC 6749 4.1.2)."""

    model_config = ConfigDict(extra="ignore")

    code: str | None = Field(default=None, description="The authorization code (good once).")
    state: str | None = Field(default=None, description="The sign-in's `state`, as sent.")
    error: str | None = Field(default=None, description="Why GitLab did not authorize.")


def _redirect(location: str, status: int) -> Response:
    """A redirect with the dashboard's security headers."""
    return secured(Response(status=status, headers={"Location": location}))


def _failed(status: int, reason: str) -> Response:
    """The sign-in failed page; the sign-in cookie is gone (start again)."""
    response = render("signin_failed.html.j2", status, reason=reason)
    clear_flow(response, services_of().settings)
    return response


@bp.get("/login")
def login() -> Response:
    """Off to GitLab to sign in, with a fresh state and PKCE challenge."""
    settings = services_of().settings
    if not configured(settings):
        return render("signin_failed.html.j2", 404, reason=NOT_CONFIGURED)
    state = secrets.token_urlsafe(32)
    verifier, challenge = oauth.pkce_pair()
    response = _redirect(oauth.authorize_url(settings, state, challenge), 302)
    save_flow(response, settings, state, verifier)
    return response


@bp.get("/callback")
def callback() -> Response:
    """GitLab's answer: checked against the sign-in started here, then the session."""
    services = services_of()
    settings = services.settings
    if not configured(settings):
        return render("signin_failed.html.j2", 404, reason=NOT_CONFIGURED)
    flow = read_flow(settings, request.cookies.get(FLOW_COOKIE))
    given = request.args.get("state") or ""
    if flow is None:
        return _failed(400, "No sign-in was started from this browser, or it took too long.")
    state, verifier = flow
    if not hmac.compare_digest(given.encode("utf-8", "replace"), state.encode("ascii")):
        return _failed(400, "The answer does not belong to the sign-in started here (state).")
    if request.args.get("error"):
        return _failed(401, "GitLab did not authorize the sign-in.")
    code = request.args.get("code") or ""
    if not code:
        return _failed(400, "GitLab sent no authorization code.")
    try:
        token = oauth.exchange(settings, code, verifier)
        user = oauth.gitlab_user(settings, token)
        if not admitted(services, user):
            log.warning("dashboard sign-in refused", extra={"gitlab_user": user.username})
            return _failed(
                403,
                f"{user.username} may not see this dashboard: ask for GITOPS_DASHBOARD_USERS, "
                "or Reporter access to a project the bot manages.",
            )
    except SignInFailed as exc:
        return _failed(exc.status, exc.reason)
    log.info("dashboard sign-in", extra={"gitlab_user": user.username})
    response = _redirect("/", 303)
    start_session(response, settings, SignedIn(user.username, user.user_id))
    clear_flow(response, settings)
    return response


@bp.post("/logout")
def logout() -> Response:
    """Ends the GitLab session of this browser."""
    response = render("signed_out.html.j2", visitor=None)
    end_session(response, services_of().settings)
    return response
