"""Who calls the REST API, and what it may do: the client a bearer token names
(bot/store/clients.py), the scope each route declares (webhooks/api_contract.py), the projects a
client is limited to.

- 401 `unauthorized`: no token, or one that names no client (wrong, or revoked).
- 403 `insufficient_scope` (with `scope`): the client's token lacks the route's scope.
- 403 `project_not_allowed`: the change (or the request's project) is in a project the client
  is not limited to; nothing is done and nothing recorded.

The dashboard (webhooks/pages.py) takes a client's token too, with the `read` scope.
"""

from __future__ import annotations

from flask import g

from bot.services import Services
from bot.store.clients import ApiClient, ChangeOwner, Scope, authenticate, change_owner
from webhooks.api_body import OPERATION_ID, ApiError

#: Where the request's client is kept for the view (flask.g).
_CLIENT = "api_client"


def bearer_token(header: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (the scheme in any case), as the client
    sent its bytes; None for no header, another scheme or an empty token."""
    if not header:
        return None
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    try:  # WSGI headers are latin-1 decoded: the client's bytes again, read as UTF-8
        return given.strip().encode("latin-1").decode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return given.strip()


def client_for(services: Services, header: str | None) -> ApiClient | None:
    """The client the Authorization header names, or None."""
    return authenticate(services.engine, bearer_token(header), services.settings.api_token)


def authenticated(services: Services, header: str | None, scope: Scope | None) -> ApiClient:
    """The client, kept for the request's view; 401 without a valid token, 403 without the
    scope."""
    client = client_for(services, header)
    if client is None:
        raise ApiError(401, "unauthorized", "missing, wrong or revoked bearer token")
    if scope is not None and not client.allows(scope):
        raise ApiError(
            403,
            "insufficient_scope",
            f"this client ({client.name}) lacks the {scope.value!r} scope this needs",
            scope=scope.value,
        )
    setattr(g, _CLIENT, client)
    return client


def current_client() -> ApiClient:
    """The client the request was authenticated as (webhooks/api.py's before_request)."""
    client = getattr(g, _CLIENT, None)
    assert isinstance(client, ApiClient), "the request was not authenticated"
    return client


def require_project(client: ApiClient, project: str) -> None:
    """403 `project_not_allowed` when the client may not act on `project`."""
    if not client.may_act_on(project):
        raise ApiError(
            403,
            "project_not_allowed",
            f"this client ({client.name}) may act only on {', '.join(client.projects)}",
            project=project,
        )


def require_change(services: Services, client: ApiClient, operation_id: str) -> ChangeOwner:
    """The change's owner; 404 for no such change, 403 `project_not_allowed` for a change in a
    project the client may not act on (which it is not told)."""
    owner = None
    if OPERATION_ID.fullmatch(operation_id):
        owner = change_owner(services.engine, operation_id)
    if owner is None:
        raise ApiError(404, "not_found", "no operation has this id")
    if not client.may_act_on(owner.project, owner.project_id):
        raise ApiError(
            403,
            "project_not_allowed",
            f"this change is in a project this client ({client.name}) may not act on; it may "
            f"act only on {', '.join(client.projects)}",
        )
    return owner
