"""Deployment signals (callbacks, deployment events, target-branch pipelines) and what they move."""

from __future__ import annotations

from bot.app.events.handled import EventHandled
from bot.app.events.mismatch import record_mismatch
from bot.app.events.stale import record_stale
from bot.app.events.validate import mark_validated
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.errors import IllegalTransition, NotOwner, UnknownOperation
from bot.ingress.deploy import DeployAuth, DeployCallback
from bot.ingress.gitlab_events import DeploymentEvent, PipelineEvent
from bot.store.engine import Engine
from bot.store.fire import fire
from bot.store.lookups import OperationRef, callback_target, merge_commit_owner
from bot.store.operations import load
from bot.store.signals import record_signal

#: The status a deploy signal is kept with when its callback did not match its change:
#: reconciliation uses only "success" signals, so such a row never validates anything.
MISMATCH = "mismatch"


def on_deploy_callback(
    engine: Engine, cb: DeployCallback, correlation_id: str, auth: DeployAuth | None = None
) -> EventHandled:
    """The deployment pipeline's word on a merged change: validated, or failed to deploy.

    A callback naming an operation must match that operation's project and MR (or merge
    commit), and one for a project with its own deploy secret must have been authenticated
    with it (`auth`). Otherwise it is a mismatch: audited, counted, kept as a signal that
    reconciliation never uses, and nothing moves.
    """
    op_id, ref = callback_target(engine, cb.operation_id, cb.project_id, cb.mr_iid)
    refusal: str | None = None
    if ref is not None:
        if cb.operation_id is not None:
            refusal = callback_mismatch(cb, ref)
        refusal = refusal or (auth or DeployAuth()).refusal(ref.project, ref.project_id)
    record_signal(
        engine,
        source="callback",
        project_id=cb.project_id,
        status=MISMATCH if refusal else cb.status,
        mr_iid=cb.mr_iid,
        operation_id=cb.operation_id,
        sha=cb.sha,
    )
    event = Event.DEPLOYED if cb.status == "success" else Event.DEPLOY_FAILED
    if ref is not None and refusal:
        return record_mismatch(
            engine, ref.id, event, refusal, source="deploy", correlation_id=correlation_id
        )
    if op_id is None:
        return record_stale(
            engine,
            None,
            Event.DEPLOYED,
            "no operation owns this MR",
            source=Source.WEBHOOK,
            correlation_id=correlation_id,
        )
    if cb.status == "success":
        return mark_validated(
            engine, op_id, source=Source.WEBHOOK, actor="deploy", correlation_id=correlation_id
        )
    try:
        moved = fire(
            engine,
            TransitionRequest(
                op_id,
                Event.DEPLOY_FAILED,
                source=Source.WEBHOOK,
                actor="deploy",
                correlation_id=correlation_id,
            ),
        )
    except (IllegalTransition, NotOwner, UnknownOperation) as exc:
        return record_stale(
            engine,
            op_id,
            Event.DEPLOY_FAILED,
            str(exc),
            source=Source.WEBHOOK,
            correlation_id=correlation_id,
        )
    return EventHandled(op_id, moved=moved)


def callback_mismatch(cb: DeployCallback, ref: OperationRef) -> str | None:
    """Why a callback naming this operation does not match it (None: it does)."""
    if not ref.names_project(cb.project_id):
        named = ref.project + (f" (id {ref.project_id})" if ref.project_id is not None else "")
        return f"the callback names project {cb.project_id}, operation {ref.id} is in {named}"
    if ref.mr_iid is not None and cb.mr_iid == ref.mr_iid:
        return None
    merge_sha = (ref.merge_commit_sha or "").lower()
    if cb.sha is not None and merge_sha and cb.sha == merge_sha:
        return None
    return (
        f"the callback names MR !{cb.mr_iid}"
        + (f" and commit {cb.sha[:12]}" if cb.sha else "")
        + f", operation {ref.id} is MR !{ref.mr_iid}"
        + (f" merged as {merge_sha[:12]}" if merge_sha else "")
    )


def counts_for(ev: DeploymentEvent, environments: tuple[str, ...]) -> bool:
    """Whether a deployment is to an environment that puts changes in effect: one the operator
    names (GITOPS_DEPLOY_ENVIRONMENTS), else one of GitLab's `production` tier."""
    if environments:
        return ev.environment in environments
    return ev.environment_tier == "production"


def on_deployment_event(
    engine: Engine,
    ev: DeploymentEvent,
    correlation_id: str,
    environments: tuple[str, ...] = (),
) -> EventHandled:
    """A GitLab deployment that succeeded on exactly a merged head, to an environment that puts
    changes in effect and from the change's target branch, validates its change."""
    if not counts_for(ev, environments):
        return EventHandled(None, stale=f"environment {ev.environment!r} is not one that counts")
    op_id = merge_commit_owner(engine, ev.project_id, ev.sha) if ev.sha is not None else None
    if op_id is not None and ev.ref is not None and ev.ref != load(engine, op_id).target_branch:
        return EventHandled(None, stale=f"deployed from {ev.ref!r}, not the change's target")
    record_signal(
        engine, source="deployment", project_id=str(ev.project_id), status=ev.status, sha=ev.sha
    )
    if ev.status != "success" or ev.sha is None:
        return EventHandled(None, stale=f"deployment {ev.status}")
    if op_id is None:
        # it may contain a merge commit without being it: reconciliation compares ancestry
        return EventHandled(None, stale="no merge commit is exactly this SHA")
    return mark_validated(
        engine,
        op_id,
        source=Source.WEBHOOK,
        actor="gitlab-deployment",
        correlation_id=correlation_id,
    )


def on_target_pipeline(engine: Engine, ev: PipelineEvent, correlation_id: str) -> EventHandled:
    """A target-branch pipeline that succeeded on exactly a merged head validates its change:
    a branch pipeline (not a tag's, not an MR's) on the change's own target branch."""
    if ev.status != "success":
        return EventHandled(None, stale=f"pipeline {ev.status}")
    if ev.tag or ev.source in {"merge_request_event", "parent_pipeline"}:
        return EventHandled(None, stale=f"a {'tag' if ev.tag else ev.source} pipeline")
    op_id = merge_commit_owner(engine, ev.project_id, ev.sha)
    if op_id is not None and ev.ref != load(engine, op_id).target_branch:
        return EventHandled(None, stale=f"a pipeline on {ev.ref!r}, not the change's target")
    # kept for reconciliation also when no change is merged as this commit yet (the merge
    # hook may come after the pipeline's)
    record_signal(
        engine, source="pipeline", project_id=str(ev.project_id), status=ev.status, sha=ev.sha
    )
    if op_id is None:
        return EventHandled(None, stale="no merge commit is exactly this SHA")
    return mark_validated(
        engine, op_id, source=Source.WEBHOOK, actor="gitlab-pipeline", correlation_id=correlation_id
    )
