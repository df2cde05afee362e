"""GitLab webhook payloads reduced to the fields the bot uses (kodiak's habit).

Parsing is strict about what we read and indifferent to everything else: the documented
payloads carry odd timestamps (`2015-04-08T21: 00:25-07:00`) and deprecated fields we never
touch. Anything we need that is missing or of the wrong type makes the delivery Unusable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.ingress.jsonload import Unusable

#: Project ids and MR iids: the database keeps them in 32-bit INTEGER columns.
MAX_PROJECT_ID = MAX_IID = 2**31 - 1
#: Note, pipeline, deployment and user ids: GitLab's bigint ids.
MAX_ID = 2**63 - 1

#: X-Gitlab-Event values we act on, and the object_kind each must carry.
HANDLED = {
    "Merge Request Hook": "merge_request",
    "Pipeline Hook": "pipeline",
    "Note Hook": "note",
    "Deployment Hook": "deployment",
}


@dataclass(frozen=True, slots=True)
class MergeRequestEvent:
    """An MR opened, updated, merged, closed... (Merge Request Hook)."""

    project_id: int
    project_path: str
    iid: int
    action: str
    state: str
    source_branch: str
    target_branch: str
    head_sha: str | None
    merge_commit_sha: str | None
    detailed_merge_status: str | None


@dataclass(frozen=True, slots=True)
class PipelineEvent:
    """A pipeline changed status (Pipeline Hook); mr_iid is set for MR pipelines."""

    project_id: int
    pipeline_id: int
    status: str
    ref: str
    sha: str
    source: str
    mr_iid: int | None
    #: a tag's pipeline (`object_attributes.tag`): its ref is a tag name, never a branch
    tag: bool = False


@dataclass(frozen=True, slots=True)
class NoteEvent:
    """A comment (Note Hook); only comments on MRs can carry commands."""

    project_id: int
    project_path: str
    note_id: int
    note: str
    action: str
    system: bool
    noteable_type: str
    author_id: int
    author_username: str
    mr_iid: int | None
    mr_author_id: int | None
    #: an MR whose source project differs from its target comes from a fork
    from_fork: bool


@dataclass(frozen=True, slots=True)
class DeploymentEvent:
    """A deployment changed status (Deployment Hook); the full SHA is read from commit_url."""

    project_id: int
    deployment_id: int
    status: str
    environment: str
    sha: str | None
    short_sha: str
    #: GitLab's tier of the environment (`environment_tier`: production, staging, ...)
    environment_tier: str | None = None
    #: the branch or tag deployed (DataBuilder::Deployment sends `ref`; older examples lack it)
    ref: str | None = None


GitLabEvent = MergeRequestEvent | PipelineEvent | NoteEvent | DeploymentEvent


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    # bool is an int in Python; an id must not be True
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise Unusable(f"{where}.{key}: expected {_name(kind)}, got {type(value).__name__}")
    return value


def _opt(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    return None if obj.get(key) is None else _get(obj, key, kind, where)


def _id(obj: Mapping[str, Any], key: str, where: str, top: int = MAX_ID) -> int:
    """A required id: an int (not a bool) in 1..top; anything else makes the delivery Unusable.

    The range is checked here, at the door, because a stored id the database cannot hold
    (SQLite raises OverflowError past 64 bits, PostgreSQL past an INTEGER column's 32) would
    otherwise fail every time the delivery is processed.
    """
    value: int = _get(obj, key, int, where)
    if not 1 <= value <= top:
        raise Unusable(f"{where}.{key}: out of range (1..{top}), got {_short(value)}")
    return value


def _opt_id(obj: Mapping[str, Any], key: str, where: str, top: int = MAX_ID) -> int | None:
    return None if obj.get(key) is None else _id(obj, key, where, top)


def _capped(value: str | None, limit: int, what: str) -> Any:
    """A string the bot stores, no longer than its column (PostgreSQL refuses longer ones)."""
    if value is not None and len(value) > limit:
        raise Unusable(f"{what}: longer than {limit} characters")
    return value


def _short(value: int) -> str:
    """An out-of-range integer as a quarantine reason shows it (never thousands of digits)."""
    text = str(value)
    return text if len(text) <= 24 else f"{text[:20]}… ({len(text)} digits)"


def _obj(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise Unusable(f"{key}: expected an object, got {type(value).__name__}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def _merge_request(body: Mapping[str, Any]) -> MergeRequestEvent:
    attrs = _obj(body, "object_attributes")
    project = _obj(body, "project")
    last_commit = attrs.get("last_commit")
    head = last_commit.get("id") if isinstance(last_commit, Mapping) else None
    return MergeRequestEvent(
        # project.id is the hook's project; object_attributes.target_project_id is the MR's
        project_id=_id(attrs, "target_project_id", "object_attributes", MAX_PROJECT_ID),
        project_path=_capped(
            _get(project, "path_with_namespace", str, "project"), 255, "project.path_with_namespace"
        ),
        iid=_id(attrs, "iid", "object_attributes", MAX_IID),
        action=_opt(attrs, "action", str, "object_attributes") or "update",
        state=_get(attrs, "state", str, "object_attributes"),
        source_branch=_get(attrs, "source_branch", str, "object_attributes"),
        target_branch=_get(attrs, "target_branch", str, "object_attributes"),
        head_sha=head if isinstance(head, str) else None,
        merge_commit_sha=_capped(
            _opt(attrs, "merge_commit_sha", str, "object_attributes"),
            64,
            "object_attributes.merge_commit_sha",
        ),
        detailed_merge_status=_opt(attrs, "detailed_merge_status", str, "object_attributes"),
    )


def _pipeline(body: Mapping[str, Any]) -> PipelineEvent:
    attrs = _obj(body, "object_attributes")
    project = _obj(body, "project")
    mr = body.get("merge_request")
    return PipelineEvent(
        project_id=_id(project, "id", "project", MAX_PROJECT_ID),
        pipeline_id=_id(attrs, "id", "object_attributes"),
        status=_get(attrs, "status", str, "object_attributes"),
        ref=_get(attrs, "ref", str, "object_attributes"),
        sha=_get(attrs, "sha", str, "object_attributes"),
        source=_opt(attrs, "source", str, "object_attributes") or "push",
        mr_iid=_id(mr, "iid", "merge_request", MAX_IID) if isinstance(mr, Mapping) else None,
        tag=attrs.get("tag") is True,
    )


def _note(body: Mapping[str, Any]) -> NoteEvent:
    attrs = _obj(body, "object_attributes")
    user = _obj(body, "user")
    project = _obj(body, "project")
    noteable_type = _get(attrs, "noteable_type", str, "object_attributes")
    mr = body.get("merge_request") if noteable_type == "MergeRequest" else None
    if noteable_type == "MergeRequest" and not isinstance(mr, Mapping):
        raise Unusable("merge_request: missing on a comment on a merge request")
    source = _opt_id(mr, "source_project_id", "merge_request", MAX_PROJECT_ID) if mr else None
    target = _opt_id(mr, "target_project_id", "merge_request", MAX_PROJECT_ID) if mr else None
    return NoteEvent(
        project_id=_id(project, "id", "project", MAX_PROJECT_ID),
        project_path=_capped(
            _get(project, "path_with_namespace", str, "project"), 255, "project.path_with_namespace"
        ),
        note_id=_id(attrs, "id", "object_attributes"),
        note=_get(attrs, "note", str, "object_attributes"),
        # GitLab 16.11+ re-sends the hook on edits with action "update"; older ones omit it
        action=_opt(attrs, "action", str, "object_attributes") or "create",
        system=bool(_opt(attrs, "system", bool, "object_attributes")),
        noteable_type=noteable_type,
        author_id=_id(user, "id", "user"),
        author_username=_get(user, "username", str, "user"),
        mr_iid=_id(mr, "iid", "merge_request", MAX_IID) if mr else None,
        mr_author_id=_opt_id(mr, "author_id", "merge_request") if mr else None,
        from_fork=source is not None and target is not None and source != target,
    )


_SHA_IN_URL = re.compile(r"/commit/([0-9a-f]{7,64})/?$")


def _deployment(body: Mapping[str, Any]) -> DeploymentEvent:
    project = _obj(body, "project")
    commit_url = body.get("commit_url")
    found = _SHA_IN_URL.search(commit_url) if isinstance(commit_url, str) else None
    return DeploymentEvent(
        project_id=_id(project, "id", "project", MAX_PROJECT_ID),
        deployment_id=_id(body, "deployment_id", "payload"),
        status=_get(body, "status", str, "payload"),
        environment=_get(body, "environment", str, "payload"),
        # the payload carries only short_sha; the full one is the tail of commit_url
        sha=found.group(1) if found else None,
        short_sha=_get(body, "short_sha", str, "payload"),
        environment_tier=_opt(body, "environment_tier", str, "payload"),
        ref=_opt(body, "ref", str, "payload"),
    )


_PARSERS: dict[str, Callable[[Mapping[str, Any]], GitLabEvent]] = {
    "merge_request": _merge_request,
    "pipeline": _pipeline,
    "note": _note,
    "deployment": _deployment,
}


def parse(event_type: str, body: Mapping[str, Any]) -> GitLabEvent:
    """The typed event for a handled X-Gitlab-Event; raises Unusable with the reason."""
    kind = HANDLED.get(event_type)
    if kind is None:
        raise Unusable(f"not an event type the bot handles: {event_type!r}")
    if body.get("object_kind") != kind:
        raise Unusable(f"object_kind {body.get('object_kind')!r} does not match {event_type!r}")
    return _PARSERS[kind](body)
