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
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import payloads, versions
from .model import Deployment, Hook, MergeRequest, Note, Pipeline, Project, User

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
        """Headers of a re-send: the same Idempotency-Key, new per-attempt UUIDs (those of
        them the sending release has)."""
        fresh: dict[str, str] = {
            name: str(uuid.uuid4())
            for name in ("X-Gitlab-Webhook-UUID", "X-Gitlab-Event-UUID")
            if name in self.headers
        }
        return {**self.headers, **fresh}


def headers(
    kind: str,
    token: str | None,
    *,
    instance: str,
    idempotency_key: str | None = None,
    profile: versions.Profile | None = None,
) -> dict[str, str]:
    """GitLab's delivery headers as `profile`'s release sends them (default: the double's
    default profile); `X-Gitlab-Token` only when the hook has a secret. GitLab: doc/user/
    project/integrations/webhooks.md "Delivery headers" (see versions.HEADERS_*)."""
    release = profile or versions.profile(versions.DEFAULT)
    optional = {
        "X-Gitlab-Instance": instance,
        "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),
        "X-Gitlab-Event-UUID": str(uuid.uuid4()),
        "Idempotency-Key": idempotency_key or str(uuid.uuid4()),
    }
    out = {
        "Content-Type": "application/json",
        "User-Agent": f"GitLab/{release.version}",
        "X-Gitlab-Event": EVENTS[kind][1],
    }
    out |= {name: value for name, value in optional.items() if name in release.hook_headers}
    if token is not None:
        out["X-Gitlab-Token"] = token
    return out


# -- auto-disabling -------------------------------------------------------------------------

#: GitLab's thresholds (app/models/concerns/web_hooks/auto_disabling.rb): failures tolerated
#: before a hook is disabled; failures after which 17.11+ disables it for good; backoff bounds.
GRACE_FAILURES = 3
PERMANENT_FAILURES_17_11 = 39
MAX_FAILURES = 100
INITIAL_BACKOFF = timedelta(minutes=1)
MAX_BACKOFF = timedelta(days=1)


def response_category(profile: versions.Profile, status: int) -> str:
    """`WebHookService#response_category`: "ok" (2xx, 3xx), "error" (`backoff!`) or "failed"
    (`failed!`). `status` 0 is no answer (a timeout, a refused connection: GitLab's
    InternalErrorResponse, whose `internal_server_error?` is true). Up to 17.10 only 500 and
    no answer are "error" (`response.internal_server_error?`); 17.11+ has no "failed"."""
    if 200 <= status < 400:
        return "ok"
    if profile.hook_disabling == "forty-permanent" or status in {0, 500}:
        return "error"
    return "failed"


def alert_status(profile: versions.Profile, hook: Hook, now: datetime) -> str:
    """`WebHooks::AutoDisabling#alert_status` from the counters: "executable",
    "temporarily_disabled" (disabled_until not passed yet) or "disabled" (for good)."""
    until = hook.disabled_until
    if profile.hook_disabling == "forty-permanent":
        if hook.recent_failures > PERMANENT_FAILURES_17_11:
            return "disabled"
        if until is not None and until >= now and hook.recent_failures > GRACE_FAILURES:
            return "temporarily_disabled"
        return "executable"
    if until is not None and until >= now and hook.recent_failures > GRACE_FAILURES:
        return "temporarily_disabled"
    if hook.recent_failures > GRACE_FAILURES and until is None:
        return "disabled"
    return "executable"


def record_answer(profile: versions.Profile, hook: Hook, status: int, now: datetime) -> None:
    """What GitLab does to a hook after one delivery answered `status` (0: no answer):
    `enable!`, `backoff!` or `failed!` (app/services/web_hooks/log_execution_service.rb
    update_hook_failure_state; the methods in WebHooks::AutoDisabling). Sets `alert_status`."""
    category = response_category(profile, status)
    if category == "ok":
        hook.recent_failures, hook.disabled_until, hook.backoff_count = 0, None, 0
    elif profile.hook_disabling == "forty-permanent":
        _backoff_17_11(profile, hook, now)
    elif category == "error":
        _backoff_17_10(profile, hook, now)
    else:
        # `failed!`: no check of the current state; the counter grows, disabled_until is cleared
        hook.recent_failures = min(hook.recent_failures + 1, MAX_FAILURES)
        hook.disabled_until, hook.backoff_count = None, 0
    hook.alert_status = alert_status(profile, hook, now)


def _backoff_17_10(profile: versions.Profile, hook: Hook, now: datetime) -> None:
    """`backoff!` up to 17.10: nothing while disabled; from the 4th failure on, disabled for
    INITIAL_BACKOFF * 2**backoff_count (bounded), backoff_count + 1."""
    if alert_status(profile, hook, now) != "executable":
        return
    before = hook.recent_failures
    hook.recent_failures = min(before + 1, MAX_FAILURES)
    if before >= GRACE_FAILURES:
        hook.disabled_until = now + _backoff(hook.backoff_count)
        hook.backoff_count = min(hook.backoff_count + 1, MAX_FAILURES)


def _backoff_17_11(profile: versions.Profile, hook: Hook, now: datetime) -> None:
    """`backoff!` from 17.11: nothing while disabled; the counter grows up to 40; past the
    grace, disabled for INITIAL_BACKOFF * 2**(failures before - 3) (bounded)."""
    if alert_status(profile, hook, now) != "executable":
        return
    before = hook.recent_failures
    hook.recent_failures = min(before + 1, PERMANENT_FAILURES_17_11 + 1)
    if hook.recent_failures > GRACE_FAILURES:
        hook.disabled_until = now + _backoff(before - GRACE_FAILURES)


def _backoff(exponent: int) -> timedelta:
    """`INITIAL_BACKOFF * 2**exponent`, clamped to [INITIAL_BACKOFF, MAX_BACKOFF] (GitLab stops
    growing it after MAX_BACKOFF_COUNT = 11 backoffs: 2**11 minutes is past a day)."""
    delay: timedelta = INITIAL_BACKOFF * (2 ** min(max(exponent, 0), 11))
    return max(INITIAL_BACKOFF, min(delay, MAX_BACKOFF))


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
