"""Who may open the dashboard (webhooks/pages.py), in this order:

1. a trusted proxy's header (GITOPS_DASHBOARD_HEADER, when set) with a non-empty value;
2. a GitLab sign-in's session cookie (webhooks/signin.py, webhooks/session.py);
3. an API client's bearer token holding the `read` scope and limited to no project (the
   dashboard shows every project; a client limited to some reads the API instead).

Anyone else gets the 401 page (with a link to sign in with GitLab when it is set up); a valid
client token that may not read everything gets the 403 page saying why.

Who a GitLab sign-in lets in (`admitted`): a user GITOPS_DASHBOARD_USERS names, or a member with
at least Reporter access to a project in GITOPS_PROJECTS (read with the bot's author token: the
user's token has only `read_user`). Anyone else is refused; so is a user whose membership cannot
be read (fail closed).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import Request

from bot.gitlab import GitLabError
from bot.gitlab.reads import member_access_level
from bot.oauth import GitLabUser, SignInFailed
from bot.services import NoClients, Services
from bot.store.clients import Scope
from webhooks.api_auth import bearer_token, client_for
from webhooks.session import SESSION_COOKIE, session_user

log = logging.getLogger(__name__)

#: GitLab's Reporter access level: the least that lets a member in after a GitLab sign-in.
REPORTER = 20


@dataclass(frozen=True, slots=True)
class Visitor:
    """Who is looking: a name for the page's header, and whether it is a GitLab session (which
    can sign out)."""

    name: str
    signed_in: bool = False


@dataclass(frozen=True, slots=True)
class Turned:
    """Why the dashboard is not shown: 401 (who are you?) or 403 (not with this token)."""

    status: int
    reason: str = ""


def visitor(services: Services, request: Request) -> Visitor | Turned:
    """The visitor the request proves to be, or why it is turned away."""
    settings = services.settings
    header = settings.dashboard_header
    if header and (request.headers.get(header) or "").strip():
        return Visitor((request.headers.get(header) or "").strip()[:64])
    user = session_user(settings, request.cookies.get(SESSION_COOKIE))
    if user is not None:
        return Visitor(user.username, signed_in=True)
    authorization = request.headers.get("Authorization")
    if bearer_token(authorization) is None:
        return Turned(401)
    client = client_for(services, authorization)
    if client is None:
        return Turned(401)
    if not client.allows(Scope.READ):
        return Turned(
            403, f"The API client {client.name} lacks the read scope the dashboard needs."
        )
    if client.projects:
        return Turned(
            403,
            f"The API client {client.name} is limited to some projects and the dashboard shows "
            "every project: read its changes through the API (GET /api/v1/changes).",
        )
    return Visitor(client.name)


def admitted(services: Services, user: GitLabUser) -> bool:
    """Whether the user may see the dashboard: named in GITOPS_DASHBOARD_USERS, or Reporter (or
    more) in a project of GITOPS_PROJECTS. SignInFailed when no membership could be read."""
    settings = services.settings
    if user.username.casefold() in {name.casefold() for name in settings.dashboard_users}:
        return True
    if not settings.projects:
        return False
    unreadable = 0
    try:
        author = services.require_clients().author
    except NoClients:
        return False
    for project in settings.projects:
        try:
            level = member_access_level(author.project(project), user.user_id)
        except GitLabError as exc:
            log.warning("membership unreadable", extra={"project": project, "error": str(exc)})
            unreadable += 1
            continue
        if level is not None and level >= REPORTER:
            return True
    if unreadable:
        raise SignInFailed(502, "GitLab could not say whether you are a member; try again later")
    return False
