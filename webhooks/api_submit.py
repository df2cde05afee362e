"""`POST /api/v1/changes` behind its declaration (webhooks/api.py): the body validated, the
client's projects and identity applied, the policy file read, the change recorded.

Who requests the change is the client (bot/store/clients.py): its name is the `requested_by`
the approval system sees as the applicant, unless the client may speak for users
(`--on-behalf`) and names one; a `requested_by` an ordinary client cannot state is refused (422
naming the field), never recorded. The operation records the client, and the audit row of the
submission names it (`<client>`, or `<user> via <client>`). An Idempotency-Key is bound to the
body and to the client that sent it.
"""

from __future__ import annotations

from typing import Any

from flask import Response

from bot import logs
from bot.app import policy
from bot.app.submit import SubmitRefusal, SubmitRefused, submit_change
from bot.core.events import Source
from bot.core.managed import is_managed
from bot.core.states import Flow
from bot.gitlab import GitLabError
from bot.services import Services
from bot.store.clients import ApiClient, NotOnBehalf
from bot.store.flags import get_flag
from bot.store.queries import operation_by_idempotency_key
from bot.store.submit import NewRequest
from webhooks.api_auth import require_project
from webhooks.api_body import ApiError, load_body, request_hash
from webhooks.api_models import ChangeRequest, idempotency_key
from webhooks.api_refusals import validated
from webhooks.api_views import Accepted, answer


def create_change(services: Services, client: ApiClient) -> tuple[Response, int]:
    """Validates, records the operation (or refuses it), enqueues its driver; 202 on success."""
    body = load_body()
    key = idempotency_key()
    callbacks = {
        "callback_hosts": services.settings.callback_hosts,
        "callback_secret": bool(services.settings.callback_secret),
    }
    change = validated(ChangeRequest, body, context={"paths_later": True, **callbacks})
    require_project(client, change.project)
    requested_by = applicant(client, change.requested_by)
    if not is_managed(services.settings.projects, path=change.project):
        raise ApiError(
            403,
            "project_not_managed",
            f"the bot does not manage {change.project}; it is not listed in GITOPS_PROJECTS",
            project=change.project,
        )
    digest = bound_hash(client, body)
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
        requested_by=requested_by,
        flow=Flow(get_flag(services.engine, "workflow.order")),
        description=change.description or "",
        files=change.file_changes(),
        idempotency_key=key,
        request_hash=digest,
        policy_sha=recorded.sha,
        policy=recorded.as_json(),
        callback_url=change.callback_url,
        api_client=client.name,
    )
    actor = client.actor(requested_by)
    try:
        # the Idempotency-Key follows the change into the jobs it starts (bot/logs.py)
        with logs.scope(correlation_id=key, project=change.project):
            accepted = submit_change(services, new, source=Source.API, actor=actor)
    except SubmitRefused as refused:
        raise _submit_error(refused) from None
    return _accepted(services, accepted.operation_id)


def applicant(client: ApiClient, stated: str | None) -> str:
    """The change's `requested_by`: the client, or the user an on-behalf client names; 422
    `invalid` naming `requested_by` for a user an ordinary client names."""
    try:
        return client.applicant(stated)
    except NotOnBehalf as exc:
        raise ApiError(422, "invalid", f"requested_by: {exc}", field="requested_by") from None


def bound_hash(client: ApiClient, body: dict[str, Any]) -> str:
    """What an Idempotency-Key is bound to: the body's hash, and the client's name for a named
    client (the shared token's requests keep the plain body hash they always had)."""
    return request_hash(body if client.shared else {"body": body, "client": client.name})


def _policy_at_start(services: Services, project: str, branch: str) -> policy.Recorded:
    """The target branch resolved and allowed, and the project's policy file at its head
    commit, or the API's refusal: 422 `project_not_found`, `target_branch_not_found` /
    `target_branch_not_allowed` naming why, `policy_invalid` naming file:line:col; 503 while
    GitLab cannot be read."""
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
