"""The REST API (/api/v1): submit a change, follow it, retry or cancel it, list by state; the merge
queues, and promoting a change to the front of its queue.

Each route is declared with its contract (webhooks/api_contract.py: method, path, summary, the
request's models, and each status code's answer with the headers it always carries); the OpenAPI
document is generated from those declarations (webhooks/openapi.py). Synchronous validation only;
the work itself is done by the `jobs.drive.drive` job.

Every route but the document's needs a client's bearer token holding the scope its declaration
names (`read`, `submit`, `operate`, `admin`: webhooks/api_auth.py); a client limited to projects
acts on, and sees, only the changes in those, and the audit log names the client in each row an
action writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from bot.app import operator
from bot.app.operator import Refusal
from bot.app.promote import promote
from bot.core.events import Event
from bot.core.states import BindingState
from bot.services import Services
from bot.store import queue as line
from bot.store.clients import ApiClient, Scope, owners
from bot.store.queries import list_by_state, operation_view
from webhooks import api_submit
from webhooks.api_auth import authenticated, current_client, require_change
from webhooks.api_body import RETRY_AFTER_SECONDS, ApiError
from webhooks.api_contract import Reply, Routes
from webhooks.api_models import ChangeRequest, ListQuery, OperationPath, SubmitHeaders
from webhooks.api_refusals import validated
from webhooks.api_views import (
    Accepted,
    AuthenticateHeader,
    ChangeList,
    ChangeView,
    Error,
    LocationHeader,
    QueueList,
    RetryAfterHeader,
    answer,
)
from webhooks.context import services_of

bp = Blueprint("api", __name__, url_prefix="/api/v1")
routes = Routes(bp)


@bp.errorhandler(ApiError)
def _api_error(exc: ApiError) -> tuple[Response, int]:
    response = jsonify(exc.body)
    if exc.http_status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="gitops-bot"'
    if exc.http_status == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response, exc.http_status


# -- authentication ------------------------------------------------------------------------------


@bp.before_request
def _authenticate() -> None:
    """Every route but the public ones needs a client's token with the route's scope
    (webhooks/api_auth.py)."""
    if routes.is_public(request.endpoint):
        return
    scope = routes.scope_of(request.endpoint)
    authenticated(services_of(), request.headers.get("Authorization"), scope)


# -- what the operations answer alike ----------------------------------------------------------

UNAUTHORIZED = Reply(
    "`unauthorized`: missing, wrong or revoked bearer token.",
    Error,
    headers=AuthenticateHeader,
)
#: What a client without the route's scope, or limited to other projects, is answered.
FORBIDDEN_CHANGE = Reply(
    "`insufficient_scope` (with `scope`): the client's token lacks the scope this needs; "
    "`project_not_allowed`: the change is in a project the client is not limited to. Nothing "
    "done.",
    Error,
)
FORBIDDEN = Reply("`insufficient_scope` (with `scope`): the client's token lacks it.", Error)
NOT_FOUND = Reply("`not_found`: no operation has this id.", Error)
REFUSED_MOVE = Reply(
    "`illegal_transition` (not allowed in this state), `stale_operation` (a newer request "
    "replaced it) or `conflict` (it kept moving).",
    Error,
)


def _operator_action(refused: Reply = REFUSED_MOVE) -> dict[int, Reply]:
    """An operator action's answers: the change as it is now, or why not."""
    return {
        200: Reply("Done: the operation as it is now.", ChangeView),
        401: UNAUTHORIZED,
        403: FORBIDDEN_CHANGE,
        404: NOT_FOUND,
        409: refused,
    }


# -- submitting ----------------------------------------------------------------------------------


@routes.post(
    "/changes",
    operation_id="createChange",
    summary="Request a change; answered 202 with the operation to poll.",
    tag="changes",
    scope=Scope.SUBMIT,
    headers=SubmitHeaders,
    body=ChangeRequest,
    responses={
        202: Reply("Recorded; the bot carries it from here.", Accepted, headers=LocationHeader),
        400: Reply("`malformed_json`: the body is not JSON.", Error),
        401: UNAUTHORIZED,
        403: Reply(
            "`insufficient_scope` (with `scope`): the client's token lacks `submit`; "
            "`project_not_allowed` (with `project`): the client is limited to other projects; "
            "`project_not_managed` (with `project`): GITOPS_PROJECTS is set and does not list "
            "the project (by path, compared case-insensitively, or by numeric id). Nothing "
            "recorded.",
            Error,
        ),
        408: Reply(
            "`request_timeout`: the body did not arrive within GITOPS_BODY_TIMEOUT seconds; "
            "nothing recorded.",
            Error,
        ),
        409: Reply(
            "`in_progress` (with `operation_id`): a request holds this subject and target; "
            "`conflict` or `illegal_transition`: the binding moved meanwhile.",
            Error,
        ),
        413: Reply(
            "`request_entity_too_large`: the body is larger than the limit "
            "(GITOPS_MAX_BODY_BYTES), which also bounds the files' contents together.",
            Error,
        ),
        422: Reply(
            "`invalid` (with `field`; `requested_by` when a client not allowed to speak for "
            "users names someone else), `invalid_path` (with `path`), `protected_path` (with "
            "`path`: `.gitlab-ci.yml`, `.gitlab/`, the CODEOWNERS files, `.gitattributes`, the "
            "policy file, and the policy file's `paths.protected`; allowed only when the "
            "allowed paths name them), `policy_invalid` (with `problems`: the target branch's "
            "`.gitops/bot.yml` cannot be used, each problem as `file:line:col: message`; "
            "nothing recorded), `project_not_found` (GitLab shows the bot no such project), "
            "`target_branch_not_found` or `target_branch_not_allowed` (with "
            "`field`: the target branch does not exist, is not protected, or is not one "
            "GITOPS_TARGET_BRANCHES -- unset: the project's default branch -- and the policy "
            "file's `target_branches` allow; nothing recorded), `callback_not_allowed` (with "
            "`field`: the callback_url's host "
            "is not in GITOPS_CALLBACK_HOSTS, or the bot has no GITOPS_CALLBACK_SECRET) or "
            "`idempotency_key_reused` (with `operation_id`). The allowed paths are the policy "
            "file's `paths.allowed`, else GITOPS_ALLOWED_PATHS.",
            Error,
        ),
        503: Reply(
            "`overloaded` (with `operation_id`): recorded as failed (CREATE_FAILED, step "
            "CREATE_OVERLOADED); retry after Retry-After seconds, with the same "
            "Idempotency-Key; `gitlab_unavailable`: the project's policy file could not be "
            "read; nothing recorded, retry after Retry-After seconds.",
            Error,
            headers=RetryAfterHeader,
        ),
    },
)
def create_change() -> tuple[Response, int]:
    """Validates, records the operation (or refuses it), enqueues its driver; 202 on success
    (webhooks/api_submit.py)."""
    return api_submit.create_change(services_of(), current_client())


# -- reading and operator actions -----------------------------------------------------------------


def _view_json(services: Services, operation_id: str, *, with_history: bool = True) -> Any:
    view = operation_view(services.engine, operation_id, with_history=with_history)
    if view is None:
        raise ApiError(404, "not_found", "no operation has this id")
    place = None
    if view.phase is BindingState.MERGING and view.owns_binding:
        place = line.place(services.engine, operation_id)
    return {
        **view.as_json(),
        "queue": None if place is None else place.as_json(),
        "policy_commit": view.policy_sha,
    }


@routes.get(
    "/changes/{operation_id}",
    operation_id="getChange",
    summary="An operation: phase, step, hint, MR, history and merge queue place.",
    tag="changes",
    scope=Scope.READ,
    path_params=OperationPath,
    responses={
        200: Reply("The operation.", ChangeView),
        401: UNAUTHORIZED,
        403: FORBIDDEN_CHANGE,
        404: NOT_FOUND,
    },
)
def get_change(operation_id: str) -> tuple[Response, int]:
    """The operation's phase, step, hint, MR, history and place in its merge queue."""
    services = services_of()
    require_change(services, current_client(), operation_id)
    return answer(ChangeView, _view_json(services, operation_id))


#: How each refusal of an operator action answers: status, code, message (None: the cause's).
_REFUSED: dict[Refusal, tuple[int, str | None]] = {
    Refusal.NOT_FOUND: (404, "no operation has this id"),
    Refusal.STALE: (409, "a newer request has replaced this operation"),
    Refusal.ILLEGAL: (409, None),
    Refusal.CONFLICT: (409, "the operation kept moving; try again"),
    Refusal.NOT_QUEUED: (409, None),
}


def _operator(
    operation_id: str, act: Callable[[Services, ApiClient], object]
) -> tuple[Response, int]:
    """Runs an operator action on a change the client may act on, as the client (the audit log
    names it); the change as it is now, or the refusal."""
    services = services_of()
    client = current_client()
    require_change(services, client, operation_id)
    try:
        act(services, client)
    except operator.OperatorRefused as refused:
        status, message = _REFUSED[refused.kind]
        raise ApiError(status, refused.kind.value, message or refused.detail) from None
    return answer(ChangeView, _view_json(services, operation_id))


def _move(operation_id: str, event: Event) -> tuple[Response, int]:
    return _operator(
        operation_id,
        lambda services, client: operator.move(services, operation_id, event, actor=client.actor()),
    )


@routes.post(
    "/changes/{operation_id}/retry",
    operation_id="retryChange",
    summary="Re-drive the step where the operation stopped.",
    tag="changes",
    scope=Scope.OPERATE,
    path_params=OperationPath,
    responses=_operator_action(),
)
def retry_change(operation_id: str) -> tuple[Response, int]:
    """Re-drives the step where the operation stopped (steps are idempotent)."""
    return _move(operation_id, Event.RETRY)


@routes.post(
    "/changes/{operation_id}/cancel",
    operation_id="cancelChange",
    summary="Cancel: withdraw the approval and close the bot's MR.",
    tag="changes",
    scope=Scope.OPERATE,
    path_params=OperationPath,
    responses=_operator_action(),
)
def cancel_change(operation_id: str) -> tuple[Response, int]:
    """Closes the operation: approval withdrawn and the bot's MR closed (through the outbox)."""
    return _move(operation_id, Event.CANCEL)


@routes.post(
    "/changes/{operation_id}/promote",
    operation_id="promoteChange",
    summary="Move a merging change to the front of its branch's merge queue (recorded in its "
    "audit log) and drive the line's head; its `queue` says where it stands now.",
    tag="changes",
    scope=Scope.ADMIN,
    path_params=OperationPath,
    responses=_operator_action(
        Reply(
            "`not_queued` (it is in no merge queue: only a MERGING change waits in one) or "
            "`stale_operation` (a newer request replaced it).",
            Error,
        )
    ),
)
def promote_change(operation_id: str) -> tuple[Response, int]:
    """Moves a merging change to the front of its branch's merge queue and drives the line's
    head; 409 `not_queued` for a change in no queue."""
    return _operator(
        operation_id,
        lambda services, client: promote(services, operation_id, actor=client.actor()),
    )


@routes.get(
    "/queues",
    operation_id="listQueues",
    summary="The merge queues: per project and target branch, the changes waiting to merge, "
    "each line head first (a client limited to projects sees theirs).",
    tag="queues",
    scope=Scope.READ,
    responses={
        200: Reply("The lines (an empty list: none waits).", QueueList),
        401: UNAUTHORIZED,
        403: FORBIDDEN,
    },
)
def list_queues() -> tuple[Response, int]:
    """Every merge queue (per project and target branch), each head first; a client limited to
    projects sees the changes in those."""
    engine = services_of().engine
    client = current_client()
    entries = line.all_lines(engine)
    if client.projects:
        found = owners(engine, [entry.operation_id for entry in entries])
        entries = [
            entry
            for entry in entries
            if (owner := found.get(entry.operation_id))
            and client.may_act_on(owner.project, owner.project_id)
        ]
    return answer(QueueList, {"queues": line.lines_json(entries)})


@routes.get(
    "/changes",
    operation_id="listChanges",
    summary="Current requests (those owning their subject and target), newest first (a client "
    "limited to projects sees theirs).",
    tag="changes",
    scope=Scope.READ,
    query=ListQuery,
    responses={
        200: Reply("The requests.", ChangeList),
        401: UNAUTHORIZED,
        403: FORBIDDEN,
        422: Reply(
            "`invalid` (with `field`): an unknown or empty state, or a limit out of range.", Error
        ),
    },
)
def list_changes() -> tuple[Response, int]:
    """Operations that own their binding, in the given states, newest first; a client limited
    to projects sees those in its projects."""
    given: dict[str, Any] = {"state": request.args.getlist("state")}
    if "limit" in request.args:
        given["limit"] = request.args["limit"]
    query = validated(ListQuery, given, top=True)
    projects = current_client().projects
    views = list_by_state(services_of().engine, query.state, query.limit, projects=projects)
    return answer(ChangeList, {"changes": [view.as_json() for view in views]})


@routes.get(
    "/openapi.json",
    operation_id="openapi",
    summary="This document.",
    tag="meta",
    public=True,  # it holds no secret
    responses={200: Reply("The OpenAPI document.", {"type": "object"})},
)
def openapi() -> Response:
    """The OpenAPI 3.1 document of this service, generated from the routes' declarations."""
    from webhooks.openapi import document

    return jsonify(document(current_app, services_of().settings.public_url))
