"""The REST API (/api/v1): submit a change, follow it, retry or cancel it, list by state.

Synchronous validation only; the work itself is done by the `jobs.drive.drive` job.
"""

from __future__ import annotations

import hmac
from typing import Any

from flask import Blueprint, Response, jsonify, request

from bot.app import operator
from bot.app.operator import Refusal
from bot.app.submit import SubmitRefusal, SubmitRefused, submit_change
from bot.core.events import Event, Source
from bot.core.managed import is_managed
from bot.core.states import BindingState, Flow
from bot.services import Services
from bot.store.flags import get_flag
from bot.store.queries import list_by_state, operation_view
from bot.store.submit import NewRequest
from webhooks.api_body import (
    DEFAULT_LIST_LIMIT,
    LIMIT_PATTERN,
    MAX_LIST_LIMIT,
    OPERATION_ID,
    RETRY_AFTER_SECONDS,
    ApiError,
    idempotency_key,
    invalid,
    load_body,
    request_hash,
    validate_change,
)
from webhooks.context import services_of

bp = Blueprint("api", __name__, url_prefix="/api/v1")

#: Who operator actions through the API are recorded as in the audit log.
OPERATOR_ACTOR = "api"


@bp.errorhandler(ApiError)
def _api_error(exc: ApiError) -> tuple[Response, int]:
    response = jsonify(exc.body)
    if exc.http_status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="gitops-bot"'
    if exc.http_status == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response, exc.http_status


# -- authentication ------------------------------------------------------------------------------


def bearer_ok(header: str | None, token: str) -> bool:
    """Constant-time check of `Authorization: Bearer <token>`; an empty token refuses all."""
    if not token or not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    try:
        given_bytes = given.strip().encode("latin-1")  # WSGI headers are latin-1 decoded
    except UnicodeEncodeError:
        given_bytes = given.strip().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(given_bytes, token.encode("utf-8"))


@bp.before_request
def _authenticate() -> None:
    if request.endpoint == "api.openapi":
        return
    if not bearer_ok(request.headers.get("Authorization"), services_of().settings.api_token):
        raise ApiError(401, "unauthorized", "missing or wrong bearer token")


@bp.post("/changes")
def create_change() -> tuple[Response, int]:
    """Validates, records the operation (or refuses it), enqueues its driver; 202 on success."""
    services = services_of()
    body = load_body()
    key = idempotency_key()
    change = validate_change(body, services.settings.allowed_paths)
    if not is_managed(services.settings.projects, path=change.project):
        raise ApiError(
            403,
            "project_not_managed",
            f"the bot does not manage {change.project}; it is not listed in GITOPS_PROJECTS",
            project=change.project,
        )
    new = NewRequest(
        subject_id=change.subject_id,
        target_key=change.target_key,
        project=change.project,
        target_branch=change.target_branch,
        title=change.title,
        requested_by=change.requested_by,
        flow=Flow(get_flag(services.engine, "workflow.order")),
        description=change.description,
        files=change.files,
        idempotency_key=key,
        request_hash=request_hash(body),
    )
    try:
        accepted = submit_change(services, new, source=Source.API, actor=change.requested_by)
    except SubmitRefused as refused:
        raise _submit_error(refused) from None
    return _accepted(services, accepted.operation_id)


def _submit_error(refused: SubmitRefused) -> ApiError:
    """How the API answers each refusal of a submission."""
    match refused.kind:
        case SubmitRefusal.KEY_REUSED:
            return ApiError(
                422, "idempotency_key_reused", refused.message, operation_id=refused.operation_id
            )
        case SubmitRefusal.IN_PROGRESS:
            return ApiError(409, "in_progress", refused.message, operation_id=refused.operation_id)
        case SubmitRefusal.CONFLICT:
            return ApiError(409, "conflict", refused.message)
        case SubmitRefusal.ILLEGAL:
            return ApiError(409, "illegal_transition", refused.message)
        case SubmitRefusal.OVERLOADED:
            return ApiError(503, "overloaded", refused.message, operation_id=refused.operation_id)


def _accepted(services: Services, operation_id: str) -> tuple[Response, int]:
    status_url = f"{services.settings.public_url.rstrip('/')}/api/v1/changes/{operation_id}"
    response = jsonify(operation_id=operation_id, status_url=status_url)
    response.headers["Location"] = status_url
    return response, 202


# -- reading and operator actions -----------------------------------------------------------------


def _view_json(services: Services, operation_id: str, *, with_history: bool = True) -> Any:
    if not OPERATION_ID.fullmatch(operation_id):
        raise ApiError(404, "not_found", "no operation has this id")
    view = operation_view(services.engine, operation_id, with_history=with_history)
    if view is None:
        raise ApiError(404, "not_found", "no operation has this id")
    return view.as_json()


@bp.get("/changes/<operation_id>")
def get_change(operation_id: str) -> Response:
    """The operation's phase, step, hint, MR and history."""
    return jsonify(_view_json(services_of(), operation_id))


#: How each refusal of an operator action answers: status, code, message (None: the cause's).
_REFUSED: dict[Refusal, tuple[int, str | None]] = {
    Refusal.NOT_FOUND: (404, "no operation has this id"),
    Refusal.STALE: (409, "a newer request has replaced this operation"),
    Refusal.ILLEGAL: (409, None),
    Refusal.CONFLICT: (409, "the operation kept moving; try again"),
}


def _operator(operation_id: str, event: Event) -> Response:
    services = services_of()
    if not OPERATION_ID.fullmatch(operation_id):
        raise ApiError(404, "not_found", "no operation has this id")
    try:
        operator.move(services, operation_id, event, actor=OPERATOR_ACTOR)
    except operator.OperatorRefused as refused:
        status, message = _REFUSED[refused.kind]
        raise ApiError(status, refused.kind.value, message or refused.detail) from None
    return jsonify(_view_json(services, operation_id))


@bp.post("/changes/<operation_id>/retry")
def retry_change(operation_id: str) -> Response:
    """Re-drives the step where the operation stopped (steps are idempotent)."""
    return _operator(operation_id, Event.RETRY)


@bp.post("/changes/<operation_id>/cancel")
def cancel_change(operation_id: str) -> Response:
    """Closes the operation: approval withdrawn and the bot's MR closed (through the outbox)."""
    return _operator(operation_id, Event.CANCEL)


@bp.get("/changes")
def list_changes() -> Response:
    """Operations that own their binding, in the given states, newest first."""
    states: list[BindingState] = []
    for raw in request.args.getlist("state"):
        for name in filter(None, (part.strip().upper() for part in raw.split(","))):
            try:
                states.append(BindingState(name))
            except ValueError:
                invalid("state", f"unknown state {name!r}; one of {', '.join(BindingState)}")
    raw_limit = request.args.get("limit", str(DEFAULT_LIST_LIMIT))
    if not LIMIT_PATTERN.fullmatch(raw_limit) or not 1 <= int(raw_limit) <= MAX_LIST_LIMIT:
        invalid("limit", f"must be a whole number from 1 to {MAX_LIST_LIMIT}")
    views = list_by_state(services_of().engine, states, int(raw_limit))
    return jsonify(changes=[view.as_json() for view in views])


@bp.get("/openapi.json")
def openapi() -> Response:
    """The OpenAPI 3.1 document of this service (public: it holds no secret)."""
    from webhooks.openapi import document

    return jsonify(document(services_of().settings.public_url))
