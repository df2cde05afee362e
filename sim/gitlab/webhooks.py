"""Webhook payloads built on GitLab's documented examples, filled with the double's values.

Each builder copies the documented payload (examples/*.json: copies of tests/fixtures/ that a
test keeps equal), keeps its keys, and overwrites ids, iids, project, shas, statuses, texts,
users and action from the state.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import payloads
from .model import Deployment, MergeRequest, Note, Pipeline, Project, User

if TYPE_CHECKING:
    from .state import State

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parent / "examples"
#: kind -> (documented example, X-Gitlab-Event)
EVENTS = {
    "merge_request": ("merge_request.json", "Merge Request Hook"),
    "pipeline": ("pipeline.json", "Pipeline Hook"),
    "note": ("note_merge_request.json", "Note Hook"),
    "deployment": ("deployment.json", "Deployment Hook"),
}


@dataclass
class Delivery:
    """A webhook GitLab would send (or a test built): where, headers, raw body."""

    kind: str
    url: str | None
    headers: dict[str, str]
    body: bytes
    hook_id: int | None = None

    @property
    def payload(self) -> JSON:
        """The decoded body."""
        parsed: JSON = json.loads(self.body)
        return parsed

    def resend_headers(self) -> dict[str, str]:
        """Headers of a re-send: the same Idempotency-Key, new per-attempt UUIDs."""
        fresh = {
            "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),
            "X-Gitlab-Event-UUID": str(uuid.uuid4()),
        }
        return {**self.headers, **fresh}


def headers(
    kind: str, token: str | None, *, instance: str, idempotency_key: str | None = None
) -> dict[str, str]:
    """GitLab's delivery headers; `X-Gitlab-Token` only when the hook has a secret."""
    out = {
        "Content-Type": "application/json",
        "User-Agent": "GitLab/17.6.0",
        "X-Gitlab-Event": EVENTS[kind][1],
        "X-Gitlab-Instance": instance,
        "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),
        "X-Gitlab-Event-UUID": str(uuid.uuid4()),
        "Idempotency-Key": idempotency_key or str(uuid.uuid4()),
    }
    if token is not None:
        out["X-Gitlab-Token"] = token
    return out


@functools.cache
def _example_text(kind: str) -> str:
    """The documented payload's text (parsed afresh for every build)."""
    return (FIXTURES / EVENTS[kind][0]).read_text()


def example(kind: str) -> JSON:
    """A fresh copy of the documented payload for a kind."""
    parsed: JSON = json.loads(_example_text(kind))
    return parsed


def build(
    state: State,
    kind: str,
    *,
    project: Project,
    actor: User,
    mr: MergeRequest | None = None,
    note: Note | None = None,
    pipeline: Pipeline | None = None,
    deployment: Deployment | None = None,
    action: str | None = None,
    changes: Mapping[str, Any] | None = None,
    oldrev: str | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> JSON:
    """The payload for `kind`, from the documented example and the given objects."""
    payload = example(kind)
    if "user" in payload:
        payload["user"] = payloads.overlay(payload["user"], payloads.user(actor))
    payload["project"] = payloads.overlay(payload["project"], payloads.project(state, project))
    if "repository" in payload:
        url = state.project_url(project)
        payload["repository"] = {"name": project.name, "url": f"{url}.git", "description": ""}
        payload["repository"]["homepage"] = url
    if "project_id" in payload:
        payload["project_id"] = project.id
    if kind == "merge_request":
        assert mr is not None
        payloads.fill_mr(state, payload, project, mr, action, changes, oldrev)
    elif kind == "note":
        assert mr is not None
        assert note is not None
        payloads.fill_note(state, payload, project, mr, note, action)
    elif kind == "pipeline":
        assert pipeline is not None
        payloads.fill_pipeline(state, payload, project, pipeline, mr)
    else:
        assert deployment is not None
        payloads.fill_deployment(state, payload, project, deployment)
    target = payload if kind == "deployment" else payload["object_attributes"]
    target.update(attrs or {})
    return payload
