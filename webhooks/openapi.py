"""The OpenAPI 3.1 document of the service: the REST API in full, the other routes briefly.

A test walks the app's url_map against `paths` in both directions, so a route added without its
entry here (or an entry left behind) fails the suite.
"""

from __future__ import annotations

from typing import Any

from bot.core.hints import HINT_KINDS
from bot.core.paths import MAX_PATH_LENGTH
from bot.core.states import BindingState, Step
from webhooks import api_body as api

_JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema}}}


def _error(description: str, schema: str = "Error") -> dict[str, Any]:
    return _json(_ref(schema), description)


_ID = {"type": "string", "maxLength": api.MAX_ID_LENGTH, "pattern": api.ID_PATTERN}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {
            "error": {"type": "string", "description": "A short, stable code."},
            "detail": {"type": "string", "description": "What went wrong, for people."},
            "field": {"type": "string", "description": "The offending field (422 invalid)."},
            "path": {
                "type": "string",
                "description": "The offending file path (invalid_path, protected_path).",
            },
            "operation_id": {
                "type": "string",
                "description": "The operation concerned (in_progress: the one holding the "
                "subject and target; overloaded: the one recorded as failed).",
            },
        },
    },
    "FileChange": {
        "oneOf": [
            {
                "type": "object",
                "required": ["path", "content"],
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "maxLength": MAX_PATH_LENGTH},
                    "content": {"type": "string", "description": "At most 512 KiB of UTF-8."},
                },
            },
            {
                "type": "object",
                "required": ["path", "action"],
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "maxLength": MAX_PATH_LENGTH},
                    "action": {"const": "delete"},
                },
            },
        ],
        "description": "A relative path: no `..`, no empty segment, no backslash or control "
        "character, nothing under `.git/`, and under one of GITOPS_ALLOWED_PATHS when set. "
        "`.` segments are dropped; the normalised path is what gets committed.",
    },
    "ChangeRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "subject_id",
            "target_key",
            "project",
            "target_branch",
            "title",
            "files",
            "requested_by",
        ],
        "properties": {
            "subject_id": {**_ID, "description": "What changes (a service, an MR...)."},
            "target_key": {**_ID, "description": "Where (a config file, an environment...)."},
            "project": {**_ID, "description": "The GitLab project path or id."},
            "target_branch": {**_ID, "description": "A valid Git branch name."},
            "title": {"type": "string", "minLength": 1, "maxLength": api.MAX_TITLE_LENGTH},
            "description": {
                "type": ["string", "null"],
                "description": f"At most {api.MAX_DESCRIPTION_BYTES} bytes of UTF-8.",
            },
            "files": {
                "type": "array",
                "minItems": 1,
                "maxItems": api.MAX_FILES,
                "items": _ref("FileChange"),
                "description": "Distinct paths; contents together within the body limit.",
            },
            "requested_by": _ID,
        },
    },
    "Accepted": {
        "type": "object",
        "required": ["operation_id", "status_url"],
        "properties": {
            "operation_id": {"type": "string"},
            "status_url": {"type": "string", "format": "uri"},
        },
    },
    "Hint": {
        "type": "object",
        "required": ["kind", "text"],
        "properties": {
            "kind": {"enum": list(HINT_KINDS)},
            "text": {"type": "string"},
        },
    },
    "HistoryEntry": {
        "type": "object",
        "required": ["at", "from", "to", "event", "step", "step_code", "source", "actor"],
        "properties": {
            "at": {"type": "string", "format": "date-time", "description": "UTC."},
            "from": {"type": ["string", "null"], "description": "null for a first request."},
            "to": {"type": "string"},
            "event": {"type": "string"},
            "step": {"type": "string"},
            "step_code": {"type": "integer"},
            "source": {"type": "string"},
            "actor": {"type": ["string", "null"]},
        },
    },
    "ChangeSummary": {
        "type": "object",
        "required": [
            "operation_id",
            "subject_id",
            "target_key",
            "flow",
            "phase",
            "step",
            "step_code",
            "hint",
            "mr_url",
            "created_at",
        ],
        "properties": {
            "operation_id": {"type": "string"},
            "subject_id": {"type": "string"},
            "target_key": {"type": "string"},
            "flow": {"enum": ["approve_first", "mr_first"]},
            "phase": {
                "enum": [s.value for s in BindingState],
                "description": "The binding's state while this operation owns it; a replaced "
                "(re-applied) operation keeps the state it ended in.",
            },
            "step": {"enum": [s.name for s in Step]},
            "step_code": {"type": "integer"},
            "hint": _ref("Hint"),
            "mr_url": {"type": ["string", "null"]},
            "created_at": {"type": "string", "format": "date-time"},
        },
    },
    "ChangeView": {
        "allOf": [
            _ref("ChangeSummary"),
            {
                "type": "object",
                "required": ["history"],
                "properties": {"history": {"type": "array", "items": _ref("HistoryEntry")}},
            },
        ]
    },
    "ChangeList": {
        "type": "object",
        "required": ["changes"],
        "properties": {"changes": {"type": "array", "items": _ref("ChangeSummary")}},
    },
}

_OPERATION_ID_PARAM = {
    "name": "operation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
_UNAUTHORIZED = _error(
    "`unauthorized`: missing or wrong bearer token (always, when none is configured)."
)
_NOT_FOUND = _error("`not_found`: no operation has this id.")


def _operator_action(summary: str, operation_id: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": operation_id,
            "summary": summary,
            "tags": ["changes"],
            "parameters": [_OPERATION_ID_PARAM],
            "responses": {
                "200": _json(_ref("ChangeView"), "Done: the operation as it is now."),
                "401": _UNAUTHORIZED,
                "404": _NOT_FOUND,
                "409": _error(
                    "`illegal_transition` (not allowed in this state), `stale_operation` "
                    "(a newer request replaced it) or `conflict` (it kept moving)."
                ),
            },
        }
    }


def _brief(method: str, summary: str, tag: str, responses: dict[str, str]) -> dict[str, Any]:
    return {
        method: {
            "summary": summary,
            "tags": [tag],
            "security": [],
            "responses": {code: {"description": text} for code, text in responses.items()},
        }
    }


_WEBHOOK_RESPONSES = {
    "200": "Authenticated; ignored, duplicate or quarantined (never retried by the sender).",
    "202": "Stored in the inbox; processed by a worker.",
    "401": "Wrong or missing secret.",
    "408": "The body did not arrive within GITOPS_BODY_TIMEOUT seconds; nothing stored.",
    "413": "Body larger than the limit.",
    "503": "Neither the database nor the queue could take the delivery; send it again.",
}


def _paths() -> dict[str, Any]:
    return {
        "/api/v1/changes": {
            "post": {
                "operationId": "createChange",
                "summary": "Request a change; answered 202 with the operation to poll.",
                "tags": ["changes"],
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "description": "The same key with the same body answers the same 202 "
                        "(a request refused as overloaded is retried instead); with another "
                        "body, 422 `idempotency_key_reused`.",
                        "schema": {
                            "type": "string",
                            "maxLength": api.MAX_IDEMPOTENCY_KEY_LENGTH,
                            "pattern": api.IDEMPOTENCY_KEY_PATTERN,
                        },
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {_JSON: {"schema": _ref("ChangeRequest")}},
                },
                "responses": {
                    "202": _json(_ref("Accepted"), "Recorded; the bot carries it from here."),
                    "400": _error("`malformed_json`: the body is not JSON."),
                    "401": _UNAUTHORIZED,
                    "403": _error(
                        "`project_not_managed` (with `project`): GITOPS_PROJECTS is set and does "
                        "not list the project (by path, compared case-insensitively, or by "
                        "numeric id); nothing recorded."
                    ),
                    "408": _error(
                        "`request_timeout`: the body did not arrive within GITOPS_BODY_TIMEOUT "
                        "seconds; nothing recorded."
                    ),
                    "409": _error("`in_progress`: a request holds this subject and target."),
                    "413": _error(
                        "`request_entity_too_large`: the body is larger than the limit "
                        "(GITOPS_MAX_BODY_BYTES), which also bounds the files' contents together."
                    ),
                    "422": _error(
                        "`invalid` (with `field`), `invalid_path` (with `path`), "
                        "`protected_path` (with `path`: `.gitlab-ci.yml`, `.gitlab/`, the "
                        "CODEOWNERS files, `.gitattributes`, the policy file; allowed only when "
                        "GITOPS_ALLOWED_PATHS names them) or `idempotency_key_reused`."
                    ),
                    "503": _error(
                        "`overloaded`: recorded as failed (CREATE_FAILED, step "
                        "CREATE_OVERLOADED); retry later, with the same Idempotency-Key."
                    ),
                },
            },
            "get": {
                "operationId": "listChanges",
                "summary": "Current requests (those owning their subject and target), newest "
                "first.",
                "tags": ["changes"],
                "parameters": [
                    {
                        "name": "state",
                        "in": "query",
                        "required": False,
                        "description": "Repeat (or separate with commas) for several; none: all.",
                        "schema": {
                            "type": "array",
                            "items": {"enum": [s.value for s in BindingState]},
                        },
                        "explode": True,
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": api.MAX_LIST_LIMIT,
                            "default": api.DEFAULT_LIST_LIMIT,
                        },
                    },
                ],
                "responses": {
                    "200": _json(_ref("ChangeList"), "The requests."),
                    "401": _UNAUTHORIZED,
                    "422": _error("`invalid`: an unknown state or a limit out of range."),
                },
            },
        },
        "/api/v1/changes/{operation_id}": {
            "get": {
                "operationId": "getChange",
                "summary": "An operation: phase, step, hint, MR and history.",
                "tags": ["changes"],
                "parameters": [_OPERATION_ID_PARAM],
                "responses": {
                    "200": _json(_ref("ChangeView"), "The operation."),
                    "401": _UNAUTHORIZED,
                    "404": _NOT_FOUND,
                },
            }
        },
        "/api/v1/changes/{operation_id}/retry": _operator_action(
            "Re-drive the step where the operation stopped.", "retryChange"
        ),
        "/api/v1/changes/{operation_id}/cancel": _operator_action(
            "Cancel: withdraw the approval and close the bot's MR.", "cancelChange"
        ),
        "/api/v1/openapi.json": _brief(
            "get", "This document.", "meta", {"200": "The OpenAPI document."}
        ),
        "/webhooks/gitlab": _brief(
            "post",
            "GitLab merge request, pipeline, note and deployment events (X-Gitlab-Token).",
            "webhooks",
            _WEBHOOK_RESPONSES,
        ),
        "/webhooks/approval": _brief(
            "post",
            "The approval system's decision (X-Approval-Timestamp, X-Approval-Signature: "
            "sha256 HMAC of `<timestamp>.<body>`, 5-minute window).",
            "webhooks",
            _WEBHOOK_RESPONSES,
        ),
        "/webhooks/deploy": _brief(
            "post",
            "The deployment pipeline's word (X-Deploy-Token, or X-Deploy-Timestamp and "
            "X-Deploy-Signature: sha256 HMAC of `<timestamp>.<body>`, 5-minute window; a "
            "project in GITOPS_DEPLOY_SECRETS only with its own secret). A callback naming "
            "an operation must name its project and MR (or merge SHA), else it changes nothing.",
            "webhooks",
            _WEBHOOK_RESPONSES,
        ),
        "/healthz": _brief("get", "The process is up.", "operations", {"200": "Up."}),
        "/readyz": _brief(
            "get",
            "The database answers.",
            "operations",
            {"200": "Ready.", "503": "Not ready."},
        ),
        "/metrics": _brief(
            "get", "Prometheus metrics (text format).", "operations", {"200": "The metrics."}
        ),
        "/": _page(
            "The dashboard (HTML): failed, pending, in-flight and recently finished requests."
        ),
        "/changes/{operation_id}": _page(
            "One request on the dashboard (HTML): phase, step, hint, timeline and path.",
            operation_id=True,
        ),
    }


def _page(summary: str, *, operation_id: bool = False) -> dict[str, Any]:
    """A dashboard page: the API token, or a trusted proxy's header (GITOPS_DASHBOARD_HEADER)."""
    responses = {"200": "The page.", "401": "Neither the token nor the proxy header."}
    if operation_id:
        responses["404"] = "No request has this id."
    get: dict[str, Any] = {
        "summary": summary,
        "tags": ["dashboard"],
        "responses": {
            code: {"description": text, "content": {"text/html": {}}}
            for code, text in responses.items()
        },
    }
    if operation_id:
        get["parameters"] = [
            {"name": "operation_id", "in": "path", "required": True, "schema": {"type": "string"}}
        ]
    return {"get": get}


def document(public_url: str = "") -> dict[str, Any]:
    """The OpenAPI document, with this deployment's URL as its server."""
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "gitops-bot",
            "version": "1",
            "description": "A GitOps change bot: request a change, the bot carries it through "
            "approval, merge request, checks, merge and deployment. Errors are JSON "
            "`{error, detail}` with a short stable `error` code.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
    if public_url:
        doc["servers"] = [{"url": public_url.rstrip("/")}]
    return doc
