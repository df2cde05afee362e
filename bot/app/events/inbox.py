"""Processing one stored delivery: parse it again, route it, mark it, drive what moved."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from prometheus_client import Counter, Histogram

from bot import logs
from bot.app.commands.note import on_note
from bot.app.events.approval import on_approval
from bot.app.events.gitlab import on_merge_request, on_pipeline
from bot.app.events.handled import EventHandled
from bot.app.events.signals import on_deploy_callback, on_deployment_event
from bot.app.queue import follow
from bot.approval.callback import parse_callback
from bot.approval.errors import MalformedCallback
from bot.errors import TransientError
from bot.ingress import gitlab_events, inbox
from bot.ingress.deploy import GLOBAL_SCOPE, SCOPE_HEADER, DeployAuth, parse_deploy
from bot.ingress.jsonload import Unusable, load_object
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.services import Services
from bot.store.inbox_jobs import inbox_status
from bot.store.models import utcnow

log = logging.getLogger(__name__)

FAILED_ATTEMPTS = Counter(
    "gitops_inbox_failed_attempts_total",
    "Processing attempts of stored deliveries that raised (each is tried again until "
    "GITOPS_INBOX_MAX_ATTEMPTS), by source.",
    ["source"],
)
TRANSIENT_QUARANTINED = Counter(
    "gitops_inbox_transient_quarantined_total",
    "Stored deliveries quarantined because another system's trouble (GitLab or the approval "
    "system answering 5xx, timing out) outlasted GITOPS_INBOX_TRANSIENT_WINDOW, by source.",
    ["source"],
)
TO_TRANSITION = Histogram(
    "gitops_webhook_to_transition_seconds",
    "Time from receiving a delivery to the transition it made (its processing committed), by "
    "source; observed in the process that handles the delivery (a worker, or the one process "
    "of the embedded default).",
    ["source"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)


def process(services: Services, inbox_id: int, *more: int) -> str:
    """Handles inbox rows once each, in order; returns the statuses they were marked with.

    Several ids come from one group commit on the ack path. One row failing does not hold
    back the others: each is tried, then the first failure is raised (the job is marked
    failed, and the sweep enqueues the row again while it is still "received" and has
    attempts left; a row whose last attempt failed is quarantined, not raised).
    """
    if not more:
        return _process_one(services, inbox_id)
    statuses: list[str] = []
    failure: Exception | None = None
    for one in (inbox_id, *more):
        try:
            statuses.append(_process_one(services, one))
        except Exception as exc:  # raised below, once the others had their turn
            log.exception("processing inbox row %s failed", one, extra={"inbox_id": one})
            failure = failure or exc
            statuses.append("failed")
    if failure is not None:
        raise failure
    return ",".join(statuses)


def _process_one(services: Services, inbox_id: int) -> str:
    """Handles inbox row `inbox_id` once; returns the status it was marked with. Its log lines
    carry the delivery's key as `correlation_id`, and the change it is about once known.

    The attempt is counted (and committed) before any work, so a delivery that makes its
    handler raise, or kills the worker, every time ends: after GITOPS_INBOX_MAX_ATTEMPTS
    attempts it is quarantined with its last error and never tried again.
    """
    with logs.scope(inbox_id=inbox_id):
        return _process_row(services, inbox_id)


def _process_row(services: Services, inbox_id: int) -> str:
    engine, limit = services.engine, services.settings.inbox_max_attempts
    attempt = inbox.begin_attempt(engine, inbox_id, limit)
    if attempt is None:  # handled already (a duplicate job), gone, or out of attempts
        found = inbox_status(engine, inbox_id)
        if found == "received":  # so its attempts are spent (they only grow)
            inbox.quarantine_exhausted(engine, limit, inbox_id)
            return "quarantined"
        return "gone" if found is None else found
    logs.bind(correlation_id=attempt.delivery_key, source=attempt.source)
    try:
        outcome = route(
            services,
            attempt.source,
            attempt.event_type,
            attempt.body,
            attempt.delivery_key,
            attempt.headers,
        )
    except (Unusable, MalformedCallback) as exc:
        inbox.mark(engine, inbox_id, "quarantined", str(exc))
        return "quarantined"
    except TransientError as exc:
        # GitLab or the approval system is down: not this delivery's fault, no attempt spent;
        # the sweep enqueues it again, and it is handled once they answer -- for a bounded
        # time (GITOPS_INBOX_TRANSIENT_WINDOW from its receipt), then quarantined with why
        FAILED_ATTEMPTS.labels(attempt.source).inc()
        error = f"{type(exc).__name__}: {exc}"
        window = services.settings.inbox_transient_window
        if (utcnow() - attempt.received_at).total_seconds() >= window:
            reason = f"still failing {window} s after it was received, on: {error}"
            inbox.mark(engine, inbox_id, "quarantined", reason)
            TRANSIENT_QUARANTINED.labels(attempt.source).inc()
            log.warning("delivery quarantined: %s", reason, extra={"inbox_id": inbox_id})
            return "quarantined"
        inbox.give_back_attempt(engine, inbox_id, error)
        raise
    except Exception as exc:
        FAILED_ATTEMPTS.labels(attempt.source).inc()
        inbox.record_failure(engine, inbox_id, f"{type(exc).__name__}: {exc}")
        if attempt.number < limit:
            raise  # the sweep enqueues it again
        log.exception(
            "inbox row %s failed its last attempt", inbox_id, extra={"inbox_id": inbox_id}
        )
        inbox.quarantine_exhausted(engine, limit, inbox_id)
        return "quarantined"
    if outcome is None:
        inbox.mark(engine, inbox_id, "ignored", "handled elsewhere")
        return "ignored"
    if outcome.moved is not None:
        waited = (utcnow() - attempt.received_at).total_seconds()
        TO_TRANSITION.labels(attempt.source).observe(max(0.0, waited))
    logs.bind(operation_id=outcome.operation_id)
    status = "processed" if outcome.moved else "stale"
    inbox.mark(engine, inbox_id, status, outcome.stale)
    follow(services, outcome.moved)  # merged or closed at the head: the next in line goes
    if outcome.drive and outcome.operation_id:
        drive_later(services, outcome.operation_id)
    return status


def route(
    services: Services,
    source: str,
    event_type: str,
    body: bytes,
    key: str,
    headers: Mapping[str, str] | None = None,
) -> EventHandled | None:
    """Sends a delivery to its handler; None for deliveries another job handles."""
    engine = services.engine
    if source == "approval":
        callback = parse_callback(body)
        logs.bind(operation_id=callback.operation_id, mr_iid=callback.mr_iid)
        return on_approval(engine, callback)
    if source == "deploy":
        signal = parse_deploy(body)
        logs.bind(
            operation_id=signal.operation_id, project_id=signal.project_id, mr_iid=signal.mr_iid
        )
        return on_deploy_callback(engine, signal, key, deploy_auth(services, headers))
    event = gitlab_events.parse(event_type, load_object(body))
    bind_event(event)
    if isinstance(event, gitlab_events.PipelineEvent):
        return on_pipeline(services, event, key)
    if isinstance(event, gitlab_events.MergeRequestEvent):
        return on_merge_request(services, event, key)
    if isinstance(event, gitlab_events.DeploymentEvent):
        return on_deployment_event(engine, event, key, services.settings.deploy_environments)
    return on_note(services, event)  # notes: MR commands (bot/app/commands/note.py)


def bind_event(event: gitlab_events.GitLabEvent) -> None:
    """The project and MR a GitLab event is about, on the lines its handling logs (a project
    named by its numeric id alone is `project_id`)."""
    match event:
        case gitlab_events.MergeRequestEvent():
            logs.bind(project=event.project_path, mr_iid=event.iid)
        case gitlab_events.NoteEvent():
            logs.bind(project=event.project_path, mr_iid=event.mr_iid)
        case gitlab_events.PipelineEvent():
            logs.bind(project_id=event.project_id, mr_iid=event.mr_iid)
        case gitlab_events.DeploymentEvent():
            logs.bind(project_id=event.project_id)


def deploy_auth(services: Services, headers: Mapping[str, str] | None) -> DeployAuth:
    """The deploy secret scope a stored callback was authenticated with (global when unsaid)."""
    settings = services.settings
    scope = (headers or {}).get(SCOPE_HEADER) or GLOBAL_SCOPE
    return DeployAuth(scope, settings.deploy_secrets, settings.deploy_secret)


def drive_later(services: Services, operation_id: str) -> None:
    """Enqueues the operation's next step; if Redis is down the sweep does it later."""
    try:
        services.queue.enqueue(DRIVE_JOB, operation_id, job_id=f"drive:{operation_id}")
    except QueueUnavailable:
        log.warning(
            "queue down: the sweep will drive this operation", extra={"operation_id": operation_id}
        )
