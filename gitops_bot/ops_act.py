"""The operator's `retry` and `cancel`: fire the event as the operator, then say how it goes on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.table import TABLE
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.render.status import load_status
from bot.services import Services
from bot.store.fire import FireResult, fire, with_conflict_retry
from bot.store.sweep import PEOPLE_STATES, STEP_STATES
from gitops_bot.ops import Refused


@dataclass(frozen=True)
class Acted:
    """What an operator action did: the transition, and how the work goes on."""

    result: FireResult
    follow_up: str


def allowed_in(event: Event) -> list[str]:
    """The states the transition table accepts `event` in."""
    return sorted({row.source.value for row in TABLE if row.event is event and row.source})


def act(services: Services, operation_id: str, event: Event, actor: str, now: datetime) -> Acted:
    """Fires RETRY or CANCEL as an operator; a retry then drives the operation on.

    With a Redis queue the drive job is enqueued; on the embedded default this process has no
    queue of the running bot's, so the retry sets the deadline to now and the bot's next sweep
    re-drives it. A retry also restarts the sweep's retry budget.
    """
    changes: dict[str, Any] = {}
    if event is Event.RETRY:
        changes["attempts"] = 0
        if services.settings.redis_url is None:
            changes["deadline_at"] = now
    verb = event.value
    try:
        result = with_conflict_retry(
            lambda: fire(
                services.engine,
                TransitionRequest(
                    operation_id,
                    event,
                    source=Source.OPERATOR,
                    actor=actor,
                    changes=changes,
                    now=now,
                ),
            )
        )
    except UnknownOperation:
        raise Refused(f"no operation has the id {operation_id!r}") from None
    except NotOwner:
        raise Refused(
            f"cannot {verb} {operation_id}: a newer request for the same subject and target "
            "replaced it (act on that one)"
        ) from None
    except IllegalTransition as exc:
        view = load_status(services.engine, operation_id)
        where = f"it is {view.phase.value} ({view.step.name})" if view else "its state refuses it"
        raise Refused(
            f"cannot {verb} {operation_id}: {where}; {verb} is allowed in "
            f"{', '.join(allowed_in(event))} [{exc}]"
        ) from None
    except Conflict:
        raise Refused(f"cannot {verb} {operation_id}: it kept moving; try again") from None
    if event is Event.CANCEL:
        follow = "the approval is withdrawn and the bot's MR closed through the outbox"
    elif services.settings.redis_url is None:
        follow = (
            "no GITOPS_REDIS_URL: the running bot's next sweep drives it"
            if result.new_state in (*STEP_STATES, *PEOPLE_STATES)
            else "it waits for the deployment's word (callback, GitLab event or reconciliation)"
        )
    else:
        try:
            services.queue.enqueue(DRIVE_JOB, operation_id, job_id=f"drive:{operation_id}")
            follow = "drive job queued"
        except QueueUnavailable:
            follow = "the queue is down: the sweep drives it once it is back"
    return Acted(result, follow)


def acted_text(acted: Acted) -> str:
    """One line: from -> to (step), then how it goes on."""
    r = acted.result
    before = r.old_state.value if r.old_state else "(new)"
    return (
        f"{r.event.value}: {r.operation_id} {before} -> {r.new_state.value} "
        f"({r.step.name} {r.step.value}); {acted.follow_up}"
    )
