"""The REST API (/api/v1): submit a change, follow it, retry or cancel it, list by state; the merge
queues, and promoting a change to the front of its queue.

Each route is declared with its contract (webhooks/api_contract.py: method, path, summary, the
request's models, and each status code's answer with the headers it always carries); the OpenAPI
document is generated from those declarations (webhooks/openapi.py). Synchronous validation only;
the work itself is done by the `jobs.drive.drive` job.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from bot import logs
from bot.app import operator, policy
from bot.app.operator import Refusal
from bot.app.promote import promote
from bot.app.submit import SubmitRefusal, SubmitRefused, submit_change
from bot.core.events import Event, Source
from bot.core.managed import is_managed
from bot.core.states import BindingState, Flow
from bot.gitlab import GitLabError
from bot.services import Services
from bot.store import queue as line
from bot.store.flags import get_flag
from bot.store.queries import list_by_state, operation_by_idempotency_key, operation_view
from bot.store.submit import NewRequest
from webhooks.api_body import OPERATION_ID, RETRY_AFTER_SECONDS, ApiError, load_body, request_hash
from webhooks.api_contract import Reply, Routes
from webhooks.api_models import (
    ChangeRequest,
    ListQuery,
    OperationPath,
    SubmitHeaders,
    idempotency_key,
)
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
    if routes.is_public(request.endpoint):
        return
    if not bearer_ok(request.headers.get("Authorization"), services_of().settings.api_token):
        raise ApiError(401, "unauthorized", "missing or wrong bearer token")


# -- what the operations answer alike ----------------------------------------------------------

UNAUTHORIZED = Reply(
    "`unauthorized`: missing or wrong bearer token (always, when none is configured).",
    Error,
    headers=AuthenticateHeader,
)
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
        404: NOT_FOUND,
        409: refused,
    }


# -- submitting ----------------------------------------------------------------------------------


@routes.post(
    "/changes",
    operation_id="createChange",
    summary="Request a change; answered 202 with the operation to poll.",
    tag="changes",
    headers=SubmitHeaders,
    body=ChangeRequest,
    responses={
        202: Reply("Recorded; the bot carries it from here.", Accepted, headers=LocationHeader),
        400: Reply("`malformed_json`: the body is not JSON.", Error),
        401: UNAUTHORIZED,
        403: Reply(
            "`project_not_managed` (with `project`): GITOPS_PROJECTS is set and does not list "
            "the project (by path, compared case-insensitively, or by numeric id); nothing "
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
            "`invalid` (with `field`), `invalid_path` (with `path`), `protected_path` (with "
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
    """Validates, records the operation (or refuses it), enqueues its driver; 202 on success."""
    services = services_of()
    body = load_body()
    key = idempotency_key()
    callbacks = {
        "callback_hosts": services.settings.callback_hosts,
        "callback_secret": bool(services.settings.callback_secret),
    }
    change = validated(ChangeRequest, body, context={"paths_later": True, **callbacks})
    if not is_managed(services.settings.projects, path=change.project):
        raise ApiError(
            403,
            "project_not_managed",
            f"the bot does not manage {change.project}; it is not listed in GITOPS_PROJECTS",
            project=change.project,
        )
    if key is not None and operation_by_idempotency_key(services.engine, key):
        # a repeat: answered as the first time (submit_change replays it), under the policy
        # recorded then, whatever the file says now
        recorded = policy.NOT_READ
    else:
        recorded = _policy_at_start(services, change.project, change.target_branch)
        allowed = policy.allowed_paths(services.settings, recorded.policy)
        context = {
            "allowed_paths": allowed,
            "protected": recorded.policy.paths.protected,
            **callbacks,
        }
        change = validated(ChangeRequest, body, context=context)
    new = NewRequest(
        subject_id=change.subject_id,
        target_key=change.target_key,
        project=change.project,
        target_branch=change.target_branch,
        title=change.title,
        requested_by=change.requested_by,
        flow=Flow(get_flag(services.engine, "workflow.order")),
        description=change.description or "",
        files=change.file_changes(),
        idempotency_key=key,
        request_hash=request_hash(body),
        policy_sha=recorded.sha,
        policy=recorded.as_json(),
        callback_url=change.callback_url,
    )
    try:
        # the Idempotency-Key follows the change into the jobs it starts (bot/logs.py)
        with logs.scope(correlation_id=key, project=change.project):
            accepted = submit_change(services, new, source=Source.API, actor=change.requested_by)
    except SubmitRefused as refused:
        raise _submit_error(refused) from None
    return _accepted(services, accepted.operation_id)


def _policy_at_start(services: Services, project: str, branch: str) -> policy.Recorded:
    """The target branch resolved and allowed, and the project's policy file at its head
    commit, or the API's refusal: 422 `target_branch_not_found` / `target_branch_not_allowed`
    naming why, `policy_invalid` naming file:line:col; 503 while GitLab cannot be read."""
    try:
        return policy.read_at_start(services, project, branch)
    except policy.PolicyInvalid as exc:
        raise ApiError(422, exc.code, exc.reason, problems=exc.problems) from None
    except policy.TargetRefused as exc:
        where = "project" if exc.code == "project_not_found" else "target_branch"
        raise ApiError(422, exc.code, exc.reason, field=where) from None
    except GitLabError as exc:
        raise ApiError(
            503, "gitlab_unavailable", f"the project's policy file could not be read: {exc}"
        ) from None


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
    response, status = answer(
        Accepted, {"operation_id": operation_id, "status_url": status_url}, 202
    )
    response.headers["Location"] = status_url
    return response, status


# -- reading and operator actions -----------------------------------------------------------------


def _view_json(services: Services, operation_id: str, *, with_history: bool = True) -> Any:
    if not OPERATION_ID.fullmatch(operation_id):
        raise ApiError(404, "not_found", "no operation has this id")
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
    path_params=OperationPath,
    responses={200: Reply("The operation.", ChangeView), 401: UNAUTHORIZED, 404: NOT_FOUND},
)
def get_change(operation_id: str) -> tuple[Response, int]:
    """The operation's phase, step, hint, MR, history and place in its merge queue."""
    return answer(ChangeView, _view_json(services_of(), operation_id))


#: How each refusal of an operator action answers: status, code, message (None: the cause's).
_REFUSED: dict[Refusal, tuple[int, str | None]] = {
    Refusal.NOT_FOUND: (404, "no operation has this id"),
    Refusal.STALE: (409, "a newer request has replaced this operation"),
    Refusal.ILLEGAL: (409, None),
    Refusal.CONFLICT: (409, "the operation kept moving; try again"),
    Refusal.NOT_QUEUED: (409, None),
}


def _operator(operation_id: str, act: Callable[[Services], object]) -> tuple[Response, int]:
    """Runs an operator action on the change; the change as it is now, or the refusal."""
    services = services_of()
    if not OPERATION_ID.fullmatch(operation_id):
        raise ApiError(404, "not_found", "no operation has this id")
    try:
        act(services)
    except operator.OperatorRefused as refused:
        status, message = _REFUSED[refused.kind]
        raise ApiError(status, refused.kind.value, message or refused.detail) from None
    return answer(ChangeView, _view_json(services, operation_id))


def _move(operation_id: str, event: Event) -> tuple[Response, int]:
    return _operator(
        operation_id,
        lambda services: operator.move(services, operation_id, event, actor=OPERATOR_ACTOR),
    )


@routes.post(
    "/changes/{operation_id}/retry",
    operation_id="retryChange",
    summary="Re-drive the step where the operation stopped.",
    tag="changes",
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
        operation_id, lambda services: promote(services, operation_id, actor=OPERATOR_ACTOR)
    )


@routes.get(
    "/queues",
    operation_id="listQueues",
    summary="The merge queues: per project and target branch, the changes waiting to merge, "
    "each line head first.",
    tag="queues",
    responses={
        200: Reply("The lines (an empty list: none waits).", QueueList),
        401: UNAUTHORIZED,
    },
)
def list_queues() -> tuple[Response, int]:
    """Every merge queue (per project and target branch), each head first."""
    return answer(QueueList, {"queues": line.lines_json(line.all_lines(services_of().engine))})


@routes.get(
    "/changes",
    operation_id="listChanges",
    summary="Current requests (those owning their subject and target), newest first.",
    tag="changes",
    query=ListQuery,
    responses={
        200: Reply("The requests.", ChangeList),
        401: UNAUTHORIZED,
        422: Reply("`invalid`: an unknown state or a limit out of range.", Error),
    },
)
def list_changes() -> tuple[Response, int]:
    """Operations that own their binding, in the given states, newest first."""
    given: dict[str, Any] = {"state": request.args.getlist("state")}
    if "limit" in request.args:
        given["limit"] = request.args["limit"]
    query = validated(ListQuery, given, top=True)
    views = list_by_state(services_of().engine, query.state, query.limit)
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
