"""Deployment signals (callbacks, deployment events, target-branch pipelines) and what they move."""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from bot.core.events import Event, Source
from bot.errors import IllegalTransition, NotOwner, UnknownOperation
from bot.ingress.deploy import DeployCallback
from bot.ingress.gitlab_events import DeploymentEvent, PipelineEvent
from bot.store.fire import fire
from bot.store.models import DEPLOY_SIGNALS, utcnow
from bot.workflow.lookup import owner_of_merge_commit, owner_of_mr
from bot.workflow.outcome import Outcome
from bot.workflow.stale import record_stale
from bot.workflow.validate import mark_validated


def record_signal(
    engine: Engine,
    *,
    source: str,
    project_id: str,
    status: str,
    mr_iid: int | None = None,
    operation_id: str | None = None,
    sha: str | None = None,
) -> None:
    """Keeps the signal for reconciliation (a lost or unmatched one is found again later)."""
    with engine.begin() as conn:
        conn.execute(
            insert(DEPLOY_SIGNALS).values(
                source=source,
                project_id=project_id,
                mr_iid=mr_iid,
                operation_id=operation_id,
                sha=sha,
                status=status,
                received_at=utcnow(),
            )
        )


def on_deploy_callback(engine: Engine, cb: DeployCallback, correlation_id: str) -> Outcome:
    """The deployment pipeline's word on a merged change: validated, or failed to deploy."""
    record_signal(
        engine,
        source="callback",
        project_id=cb.project_id,
        status=cb.status,
        mr_iid=cb.mr_iid,
        operation_id=cb.operation_id,
        sha=cb.sha,
    )
    op_id = cb.operation_id
    if op_id is None:
        with engine.connect() as conn:
            op_id = owner_of_mr(conn, cb.project_id, cb.mr_iid)
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
            op_id,
            Event.DEPLOY_FAILED,
            source=Source.WEBHOOK,
            actor="deploy",
            correlation_id=correlation_id,
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
    return Outcome(op_id, moved=moved)


def on_deployment_event(engine: Engine, ev: DeploymentEvent, correlation_id: str) -> Outcome:
    """A GitLab deployment that succeeded on exactly a merge commit validates its change."""
    record_signal(
        engine, source="deployment", project_id=str(ev.project_id), status=ev.status, sha=ev.sha
    )
    if ev.status != "success" or ev.sha is None:
        return Outcome(None, stale=f"deployment {ev.status}")
    with engine.connect() as conn:
        op_id = owner_of_merge_commit(conn, ev.project_id, ev.sha)
    if op_id is None:
        # it may contain a merge commit without being it: reconciliation compares ancestry
        return Outcome(None, stale="no merge commit is exactly this SHA")
    return mark_validated(
        engine,
        op_id,
        source=Source.WEBHOOK,
        actor="gitlab-deployment",
        correlation_id=correlation_id,
    )


def on_target_pipeline(engine: Engine, ev: PipelineEvent, correlation_id: str) -> Outcome:
    """A target-branch pipeline that succeeded on exactly a merge commit validates its change."""
    if ev.status != "success":
        return Outcome(None, stale=f"pipeline {ev.status}")
    record_signal(
        engine, source="pipeline", project_id=str(ev.project_id), status=ev.status, sha=ev.sha
    )
    with engine.connect() as conn:
        op_id = owner_of_merge_commit(conn, ev.project_id, ev.sha)
    if op_id is None:
        return Outcome(None, stale="no merge commit is exactly this SHA")
    return mark_validated(
        engine, op_id, source=Source.WEBHOOK, actor="gitlab-pipeline", correlation_id=correlation_id
    )
