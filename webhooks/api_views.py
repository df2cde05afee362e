"""The REST API's answers as pydantic models: each answer is built through its model (`answer()`),
and the OpenAPI document's response schemas are generated from the same models (the ones the
routes' declarations name, webhooks/api.py), as are the headers an answer always carries.
"""

from __future__ import annotations

from typing import Annotated, Any

from flask import Response, jsonify
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from bot.core.hints import HintKind
from bot.core.states import BindingState, Flow, Step
from webhooks.api_body import RETRY_AFTER_SECONDS

_STEPS = [step.name for step in Step]


def _a_step(name: str) -> str:
    if name not in _STEPS:
        raise ValueError(f"{name} is not a step")
    return name


StepName = Annotated[str, AfterValidator(_a_step), Field(json_schema_extra={"enum": _STEPS})]
Timestamp = Annotated[
    str, Field(json_schema_extra={"format": "date-time"}, description="UTC, ISO 8601.")
]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Error(BaseModel):
    """Every refusal: a short stable code, words for people, and what it is about."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(description="A short, stable code.")
    detail: str = Field(description="What went wrong, for people.")
    field: str | None = Field(default=None, description="The offending field (422 invalid).")
    path: str | None = Field(
        default=None, description="The offending file path (invalid_path, protected_path)."
    )
    operation_id: str | None = Field(
        default=None,
        description="The operation concerned (in_progress: the one holding the subject and "
        "target; overloaded: the one recorded as failed; idempotency_key_reused: the key's).",
    )
    project: str | None = Field(
        default=None,
        description="The request's project (project_not_managed; project_not_allowed on a "
        "submission).",
    )
    scope: str | None = Field(
        default=None, description="The scope the client's token lacks (insufficient_scope)."
    )
    problems: list[str] | None = Field(
        default=None,
        description="Every problem of the policy file as `file:line:col: message` "
        "(policy_invalid).",
    )


class Accepted(_Answer):
    """A change request recorded: the operation to poll."""

    operation_id: str
    status_url: Annotated[str, Field(json_schema_extra={"format": "uri"})]


class Hint(_Answer):
    """What the requester should make of the phase and step."""

    kind: HintKind
    text: str


class HistoryEntry(_Answer):
    """One transition of the operation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    at: Timestamp
    from_: str | None = Field(alias="from", description="null for a first request.")
    to: str
    event: str
    step: str = Field(
        description="The step's name (the bare code for one this version does not know)."
    )
    step_code: int
    source: str
    actor: str | None


class ChangeSummary(_Answer):
    """An operation in a list."""

    operation_id: str
    subject_id: str
    target_key: str
    flow: Flow
    phase: BindingState = Field(
        description="The binding's state while this operation owns it; a replaced (re-applied) "
        "operation keeps the state it ended in."
    )
    step: StepName
    step_code: int
    hint: Hint
    mr_url: str | None
    created_at: Timestamp


class QueuePlace(_Answer):
    """Where a merging change stands in its target branch's merge queue."""

    target_branch: str
    position: int = Field(ge=1, description="1: first in line.")
    size: int = Field(ge=1, description="Changes in the line.")
    head: bool = Field(
        description="It is the change that rebases, waits for its pipeline and merges next: the "
        "first in line not paused."
    )
    paused: bool = Field(
        description="Its pipeline outlived the poll tiers (HANDLE_PIPELINE_PENDING): it keeps its "
        "place and the next change goes ahead meanwhile."
    )


class ChangeView(ChangeSummary):
    """An operation in full: its history and its place in a merge queue."""

    history: list[HistoryEntry]
    queue: QueuePlace | None = Field(
        description="Its place in its target branch's merge queue while it is MERGING (and owns "
        "its subject and target); else null."
    )
    policy_commit: str | None = Field(
        description="The commit of the target branch `.gitops/bot.yml` was read at when the "
        "change started (the change follows that policy; without the file there, the "
        "environment's settings); null when no policy file was read."
    )


class ChangeList(_Answer):
    """GET /api/v1/changes."""

    changes: list[ChangeSummary]


class QueuedChange(_Answer):
    """One change waiting in a merge queue."""

    position: int = Field(ge=1)
    operation_id: str
    title: str
    mr_iid: int | None
    mr_url: str | None
    step: StepName
    step_code: int
    paused: bool = Field(description="Waits for its pipeline (pending).")
    entered_at: Timestamp


class Queue(_Answer):
    """One merge queue: a project's target branch."""

    project: str
    target_branch: str
    head: str | None = Field(
        description="The operation that merges next (null: every change is paused)."
    )
    changes: list[QueuedChange] = Field(min_length=1)


class QueueList(_Answer):
    """GET /api/v1/queues."""

    queues: list[Queue]


# -- the headers an answer always carries (the field's alias is the header's name) -------------


class AuthenticateHeader(BaseModel):
    """A 401's challenge."""

    www_authenticate: str = Field(alias="WWW-Authenticate")


class LocationHeader(BaseModel):
    """A 202's operation to poll."""

    location: str = Field(alias="Location")


class RetryAfterHeader(BaseModel):
    """A 503's seconds to wait."""

    retry_after: int = Field(
        alias="Retry-After", json_schema_extra={"example": RETRY_AFTER_SECONDS}
    )


def answer(model: type[BaseModel], data: Any, status: int = 200) -> tuple[Response, int]:
    """`data` through its model (a mismatch is a bug here, not a client's fault), as JSON."""
    return jsonify(model.model_validate(data).model_dump(mode="json", by_alias=True)), status
