"""Processing one stored delivery: parse it again, route it, mark it, drive what moved."""

from __future__ import annotations

import logging

from sqlalchemy import select

from bot.approval.callback import parse_callback
from bot.approval.errors import MalformedCallback
from bot.ingress import gitlab_events, inbox
from bot.ingress.deploy import parse_deploy
from bot.ingress.jsonload import Unusable, load_object
from bot.queueing import QueueUnavailable
from bot.services import Services
from bot.store.models import INBOX
from bot.workflow.approval import on_approval
from bot.workflow.gitlab import on_merge_request, on_pipeline
from bot.workflow.outcome import Outcome
from bot.workflow.signals import on_deploy_callback, on_deployment_event
from jobs import runtime
from jobs.commands import on_note

log = logging.getLogger(__name__)

#: The job that runs an operation's next step (jobs/drive.py).
DRIVE_JOB = "jobs.drive.drive"


def process(inbox_id: int, *more: int) -> str:
    """Handles inbox rows once each, in order; returns the statuses they were marked with.

    Several ids come from one group commit on the ack path. One row failing does not hold
    back the others: each is tried, then the first failure is raised (the job is marked
    failed, and the sweep enqueues the row again while it is still "received").
    """
    if not more:
        return _process_one(runtime.services(), inbox_id)
    statuses: list[str] = []
    failure: Exception | None = None
    for one in (inbox_id, *more):
        try:
            statuses.append(_process_one(runtime.services(), one))
        except Exception as exc:  # raised below, once the others had their turn
            log.exception("processing inbox row %s failed", one, extra={"inbox_id": one})
            failure = failure or exc
            statuses.append("failed")
    if failure is not None:
        raise failure
    return ",".join(statuses)


def _process_one(services: Services, inbox_id: int) -> str:
    """Handles inbox row `inbox_id` once; returns the status it was marked with."""
    with services.engine.connect() as conn:
        row = conn.execute(select(INBOX).where(INBOX.c.id == inbox_id)).one_or_none()
    if row is None or row.status != "received":
        return "gone" if row is None else str(row.status)
    key = str(row.delivery_key)
    try:
        outcome = route(services, row.source, row.event_type, bytes(row.body), key)
    except (Unusable, MalformedCallback) as exc:
        inbox.mark(services.engine, inbox_id, "quarantined", str(exc))
        return "quarantined"
    if outcome is None:
        inbox.mark(services.engine, inbox_id, "ignored", "handled elsewhere")
        return "ignored"
    status = "processed" if outcome.moved else "stale"
    inbox.mark(services.engine, inbox_id, status, outcome.stale)
    if outcome.drive and outcome.operation_id:
        drive_later(services, outcome.operation_id)
    return status


def route(
    services: Services, source: str, event_type: str, body: bytes, key: str
) -> Outcome | None:
    """Sends a delivery to its handler; None for deliveries another job handles."""
    engine = services.engine
    if source == "approval":
        return on_approval(engine, parse_callback(body))
    if source == "deploy":
        return on_deploy_callback(engine, parse_deploy(body), key)
    event = gitlab_events.parse(event_type, load_object(body))
    if isinstance(event, gitlab_events.PipelineEvent):
        return on_pipeline(engine, event, key)
    if isinstance(event, gitlab_events.MergeRequestEvent):
        return on_merge_request(engine, event, key)
    if isinstance(event, gitlab_events.DeploymentEvent):
        return on_deployment_event(engine, event, key)
    return on_note(services, event)  # notes: MR commands (jobs/commands.py)


def drive_later(services: Services, operation_id: str) -> None:
    """Enqueues the operation's next step; if Redis is down the sweep does it later."""
    try:
        services.queue.enqueue(DRIVE_JOB, operation_id, job_id=f"drive:{operation_id}")
    except QueueUnavailable:
        log.warning(
            "queue down: the sweep will drive this operation", extra={"operation_id": operation_id}
        )
