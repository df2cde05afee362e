"""MR and MR-pipeline events: only the operation that owns the MR, waiting for it, moves."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from bot.app.events.handled import EventHandled
from bot.app.events.signals import on_target_pipeline
from bot.app.events.stale import record_stale
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.states import AWAITING_PIPELINE, BindingState, Step
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.ingress.gitlab_events import MergeRequestEvent, PipelineEvent
from bot.store.engine import Engine
from bot.store.fire import CurrentState, fire
from bot.store.lookups import mr_owner, mr_owner_with
from bot.store.models import utcnow

_PIPELINE_EVENTS = {"success": Event.PIPELINE_PASSED, "failed": Event.PIPELINE_FAILED}
_WAITING_FOR_PIPELINE = {BindingState.MR_CREATING, BindingState.MERGING}


def on_pipeline(engine: Engine, ev: PipelineEvent, correlation_id: str) -> EventHandled:
    """Passes or fails the owner's wait for its MR pipeline; other pipelines may validate."""
    if ev.mr_iid is None:
        return on_target_pipeline(engine, ev, correlation_id)
    event = _PIPELINE_EVENTS.get(ev.status)
    if event is None:
        return EventHandled(None, stale=f"pipeline {ev.status} is not final")
    found = _owner(engine, ev.project_id, ev.mr_iid, "head_sha")
    if isinstance(found, EventHandled):
        return found
    op_id, head, current = found
    step = Step(current.guard_values["step"])
    waiting = current.state in _WAITING_FOR_PIPELINE and step in AWAITING_PIPELINE
    if not waiting:
        return record_stale(
            engine,
            op_id,
            event,
            f"not waiting for a pipeline ({step.name})",
            source=Source.WEBHOOK,
            state=current.state.value,
            correlation_id=correlation_id,
        )
    if head is not None and head != ev.sha:
        return record_stale(
            engine,
            op_id,
            event,
            "the pipeline ran on an older commit",
            source=Source.WEBHOOK,
            state=current.state.value,
            correlation_id=correlation_id,
        )
    return _fire(engine, op_id, event, correlation_id, current=current)


def on_merge_request(
    engine: Engine, ev: MergeRequestEvent, correlation_id: str, *, deploy_timeout: int
) -> EventHandled:
    """Merged (by us or by a person) or closed: the owner of the MR follows. A new head under
    an operation that is approving or merging runs its step now, so the integrity check stops
    it (and takes the approvals back) without waiting for the next poll. Merged starts the wait
    for the deployment's word: `deploy_timeout` seconds, then the sweep reports it pending."""
    event = {"merge": Event.MERGED, "close": Event.MR_CLOSED}.get(ev.action)
    if event is None and ev.action == "update" and ev.head_sha:
        return _head_moved(engine, ev)
    if event is None:
        return EventHandled(None, stale=f"MR action {ev.action} changes nothing")
    op_id = mr_owner(engine, ev.project_id, ev.iid)
    if op_id is None:
        return EventHandled(None, stale="no operation owns this MR")
    changes: dict[str, object] = {}
    if event is Event.MERGED:
        deadline = utcnow() + timedelta(seconds=deploy_timeout)
        changes = {"merge_commit_sha": ev.merge_commit_sha, "deadline_at": deadline}
    return _fire(engine, op_id, event, correlation_id, changes=changes)


def _head_moved(engine: Engine, ev: MergeRequestEvent) -> EventHandled:
    """Nudges the MR's owner in MERGING when the head is not the one it verified."""
    found = _owner(engine, ev.project_id, ev.iid, "verified_sha")
    if isinstance(found, EventHandled):
        return found
    op_id, verified, current = found
    if current.state is not BindingState.MERGING or ev.head_sha == verified:
        return EventHandled(op_id, stale="MR updated; nothing to re-check")
    return EventHandled(op_id, stale="the MR's head moved: checking it now", nudge=True)


def _owner(
    engine: Engine, project_id: int, iid: int, column: str
) -> tuple[str, Any, CurrentState] | EventHandled:
    """The MR's owning operation, one of its columns and what fire() needs; else why not."""
    found = mr_owner_with(engine, project_id, iid, column)
    if found is None:
        return EventHandled(None, stale="no operation owns this MR")
    if found.current is None:
        return EventHandled(found.operation_id, stale=found.lost)
    return found.operation_id, found.value, found.current


def _fire(
    engine: Engine,
    op_id: str,
    event: Event,
    correlation_id: str,
    *,
    current: CurrentState | None = None,
    changes: Mapping[str, object] | None = None,
) -> EventHandled:
    try:
        moved = fire(
            engine,
            TransitionRequest(
                op_id,
                event,
                source=Source.WEBHOOK,
                actor="gitlab",
                correlation_id=correlation_id,
                changes=changes or {},
            ),
            current=current,
        )
    except (IllegalTransition, Conflict, NotOwner, UnknownOperation) as exc:
        return record_stale(
            engine, op_id, event, str(exc), source=Source.WEBHOOK, correlation_id=correlation_id
        )
    return EventHandled(op_id, moved=moved)
