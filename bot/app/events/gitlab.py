"""MR and MR-pipeline events: only the operation that owns the MR, waiting for it, moves.

A pipeline is judged against the MR's head as GitLab says it is now, not against the head the
operation last stored (a rebase the bot started, or a push, moves the head without the operation
storing it): a pipeline on the MR's current head moves the wait, one on an older commit is stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from bot.app import policy
from bot.app.events.handled import EventHandled
from bot.app.events.signals import on_target_pipeline
from bot.app.events.stale import record_stale
from bot.core.events import Event, Source
from bot.core.pipelines import PipelineVerdict, judge_status, needs_parents, ran_on
from bot.core.request import TransitionRequest
from bot.core.states import AWAITING_PIPELINE, PENDING_PIPELINE, TERMINAL, BindingState, Step
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.gitlab import commit_parents, read_mr
from bot.ingress.gitlab_events import MergeRequestEvent, PipelineEvent
from bot.services import Services
from bot.store.engine import Engine
from bot.store.fire import CurrentState, fire
from bot.store.lookups import mr_owner, mr_owner_with, verified_head
from bot.store.models import utcnow
from bot.store.operations import load, note_pipeline_hook

#: a final pipeline's verdict as the wait's event (bot/core/pipelines.py judges hook and poll)
_PIPELINE_EVENTS = {
    PipelineVerdict.PASSED: Event.PIPELINE_PASSED,
    PipelineVerdict.FAILED: Event.PIPELINE_FAILED,
}
_WAITING_FOR_PIPELINE = {BindingState.MR_CREATING, BindingState.MERGING}


def on_pipeline(services: Services, ev: PipelineEvent, correlation_id: str) -> EventHandled:
    """Passes or fails the owner's wait for its MR pipeline; other pipelines may validate.

    The MR's current head is read from GitLab (one GET) -- except for the first wait on the head
    the MR was just opened with, and for the head the bot verified after its rebase -- and only
    a pipeline on that head moves the wait, polling or
    pending, after the bot's own rebase or a push alike (the step after it checks that head
    against the approval); a pipeline on any other commit is stale.
    """
    engine = services.engine
    if ev.mr_iid is None:
        return on_target_pipeline(engine, ev, correlation_id)
    # hooks reach the bot for this MR: its pipeline waits poll as a fallback only from now on
    note_pipeline_hook(engine, ev.project_id, ev.mr_iid, utcnow())
    event = _PIPELINE_EVENTS.get(judge_status(ev.status))
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
    changes: dict[str, object] = {}
    # the MR just opened at the head it stored: that head is current (the happy path, no call;
    # a push meanwhile is the integrity check's before anything is approved). Any other wait
    # may hold a head the MR no longer has (a rebase the bot started, a push): ask GitLab.
    fresh = step is Step.CREATE_SUCCEEDED and head in (None, ev.sha)
    # a head the bot itself checked against the approval since its rebase needs no read
    # either: had the MR moved on from it, the next step's read and integrity check stop it
    if not fresh and ev.sha == verified_head(engine, op_id):
        changes["head_sha"] = ev.sha
    elif not fresh:
        tested = _tested_head(services, ev)
        if tested is None:
            return record_stale(
                engine,
                op_id,
                event,
                "the pipeline ran on an older commit",
                source=Source.WEBHOOK,
                state=current.state.value,
                correlation_id=correlation_id,
            )
        changes["head_sha"] = tested  # the MR's head now (the next step checks it again)
    return _fire(engine, op_id, event, correlation_id, current=current, changes=changes)


def _tested_head(services: Services, ev: PipelineEvent) -> str | None:
    """The MR's head as GitLab says now, when the pipeline tested it: it ran on that head, or
    it is a merged results pipeline on a merge-ref commit built from it (its hook's `sha` is
    the merge-ref commit's); None when it ran on another commit. One GET, plus one of the
    commit when the pipeline's commit is not the head."""
    assert ev.mr_iid is not None
    project = services.require_clients().author.project(ev.project_id)
    head = read_mr(project, ev.mr_iid).sha
    # only a merge request pipeline (detached or merged results) may run on a merge ref
    merge_ref = ev.source == "merge_request_event" and needs_parents(ev.sha, head)
    parents = commit_parents(project, ev.sha) if merge_ref else ()
    return head if ran_on(ev.sha, head, parents) else None


def on_merge_request(
    services: Services, ev: MergeRequestEvent, correlation_id: str
) -> EventHandled:
    """Merged (by us or by a person) or closed: the owner of the MR follows; merged starts the
    wait for the deployment's word (GITOPS_DEPLOY_TIMEOUT or the policy's, then the sweep
    reports it pending). Any other MR event changes no state, but may be a reason to look at
    the MR now (see _mr_changed)."""
    engine = services.engine
    event = {"merge": Event.MERGED, "close": Event.MR_CLOSED}.get(ev.action)
    if event is None:
        return _mr_changed(engine, ev)
    op_id = mr_owner(engine, ev.project_id, ev.iid)
    if op_id is None:
        return EventHandled(None, stale="no operation owns this MR")
    changes: dict[str, object] = {}
    if event is Event.MERGED:
        # the recorded policy's deploy.timeout, else GITOPS_DEPLOY_TIMEOUT
        op = load(engine, op_id)
        timeout = policy.of(op).deploy.timeout or services.settings.deploy_timeout
        deadline = utcnow() + timedelta(seconds=timeout)
        changes = {
            "merge_commit_sha": _merged_head(services, ev, op.state),
            "deadline_at": deadline,
        }
    return _fire(engine, op_id, event, correlation_id, changes=changes)


def _merged_head(services: Services, ev: MergeRequestEvent, state: BindingState) -> str | None:
    """The commit that carries the change on the target: the hook's `merge_commit_sha` for a
    merge commit; a fast-forward merge makes none (null) and a squash's `squash_commit_sha` is
    not in the hook (HookData::MergeRequestBuilder), so then the MR is read (one GET): its
    squash commit, else its head, which the fast-forward put on the target. An operation that
    recorded its merge already, or ended, keeps what it has (the hook is stale there)."""
    if ev.merge_commit_sha is not None or state in TERMINAL or state is BindingState.MERGED:
        return ev.merge_commit_sha
    project = services.require_clients().author.project(ev.project_id)
    return read_mr(project, ev.iid).merged_sha


def _mr_changed(engine: Engine, ev: MergeRequestEvent) -> EventHandled:
    """An MR event that moves nothing by itself, so stale; but it nudges the MR's owner (its
    step runs now and reads the MR) when the operation may have missed something there:

    - approving or merging (MERGING) and the MR's head is not the one it verified: the
      integrity check stops it (and takes the approvals back) without waiting for a poll;
    - its pipeline wait went pending: the MR's head pipeline is read again, so the change
      resumes on the head the MR has now (after a rebase, a push) instead of waiting for an
      operator. Polling waits are left to their next poll.
    """
    found = _owner(engine, ev.project_id, ev.iid, "verified_sha")
    if isinstance(found, EventHandled):
        return found
    op_id, verified, current = found
    step = Step(current.guard_values["step"])
    moved = ev.action == "update" and bool(ev.head_sha) and ev.head_sha != verified
    if current.state is BindingState.MERGING and moved:
        return EventHandled(op_id, stale="the MR's head moved: checking it now", nudge=True)
    if step in PENDING_PIPELINE and current.state in _WAITING_FOR_PIPELINE:
        return EventHandled(
            op_id, stale=f"MR {ev.action}: re-reading the pending pipeline wait", nudge=True
        )
    if ev.action == "update":
        return EventHandled(op_id, stale="MR updated; nothing to re-check")
    return EventHandled(op_id, stale=f"MR action {ev.action} changes nothing")


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
