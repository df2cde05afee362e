"""Operator actions on one change: retry and cancel, for the REST API, the CLI and MR commands.

One implementation, three doors: `POST /api/v1/changes/<id>/retry|cancel`, `gitops-bot retry|cancel`
and `/gitops retry|cancel` on the MR all come here, so they move a change the same way:

- the event goes through the transition table like any other (an illegal one is refused, never
  forced), as the person who asked, with the source that says which door they used;
- a retry gives the sweep its whole re-drive budget again (`attempts = 0`) and then drives the
  change; a cancel leaves the withdrawal of the approval and the closing of the bot's MR to the
  outbox (the table's effects);
- what refuses is one `OperatorRefused` with a kind (no such change, replaced by a newer request,
  not possible where it stands, kept moving) that each door words for its audience: a status code,
  a line on the terminal, a reply on the MR.

Moving a merging change to the front of its merge queue (bot/app/promote.py) fires no event; it
refuses with the same `OperatorRefused`.

MR commands run inside the note's one transaction (bot/app/commands/once.py): they call
`move_in` with that transaction; the API and the CLI call `move`, which runs its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from bot.app.queue import follow
from bot.app.steps.waits import deploy_deadline
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState
from bot.core.table import TABLE
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.queueing import DRIVE_JOB, QueueUnavailable
from bot.render.status import load_status
from bot.services import Services
from bot.store.fire import TransitionMade, fire, fire_in, with_conflict_retry
from bot.store.models import utcnow
from bot.store.operations import load, touch
from bot.store.sweep import PEOPLE_STATES, STEP_STATES
from bot.store.tx import Tx

log = logging.getLogger(__name__)

#: The operator's verbs, as events of the transition table.
VERBS = (Event.RETRY, Event.CANCEL)


class Refusal(StrEnum):
    """Why an operator action changed nothing."""

    NOT_FOUND = "not_found"  # no change has this id
    STALE = "stale_operation"  # a newer request for the same subject and target replaced it
    ILLEGAL = "illegal_transition"  # the table refuses the verb where the change stands
    CONFLICT = "conflict"  # it kept moving under us; trying again may work
    NOT_QUEUED = "not_queued"  # promote: it waits in no merge queue (bot/app/promote.py)


class OperatorRefused(Exception):
    """An operator action the change refused; `message` is for the person, `detail` the cause;
    `event` is the verb's, None for a promotion (which fires none)."""

    def __init__(
        self, kind: Refusal, operation_id: str, event: Event | None, message: str, detail: str
    ):
        super().__init__(message)
        self.kind = kind
        self.operation_id = operation_id
        self.event = event
        self.message = message
        self.detail = detail


@dataclass(frozen=True, slots=True)
class OperatorMove:
    """What an operator action did: the transition it made, and how the change goes on."""

    transition: TransitionMade
    follow_up: str


def allowed_in(event: Event) -> list[str]:
    """The states the transition table accepts `event` in."""
    return sorted({row.source.value for row in TABLE if row.event is event and row.source})


def _changes(event: Event, now: datetime, *, drive_now: bool) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if event is Event.RETRY:
        changes["attempts"] = 0  # the sweep's whole re-drive budget again
        # the pipeline it waits on may have finished already, with no webhook to come: its
        # waits poll by their own tiers again until the next pipeline webhook arrives
        changes["pipeline_hook_at"] = None
        if not drive_now:
            changes["deadline_at"] = now  # the running bot's next sweep drives it
    return changes


def _refused(
    services: Services | None, operation_id: str, event: Event, exc: Exception
) -> OperatorRefused:
    """The refusal for `exc`; with `services`, an illegal one says where the change stands."""
    verb = event.value
    match exc:
        case UnknownOperation():
            return OperatorRefused(
                Refusal.NOT_FOUND, operation_id, event,
                f"no operation has the id {operation_id!r}", str(exc),
            )  # fmt: skip
        case NotOwner():
            return OperatorRefused(
                Refusal.STALE, operation_id, event,
                f"cannot {verb} {operation_id}: a newer request for the same subject and target "
                "replaced it (act on that one)",
                str(exc),
            )  # fmt: skip
        case IllegalTransition():
            view = load_status(services.engine, operation_id) if services else None
            where = (
                f"it is {view.phase.value} ({view.step.name})" if view else "its state refuses it"
            )
            return OperatorRefused(
                Refusal.ILLEGAL, operation_id, event,
                f"cannot {verb} {operation_id}: {where}; {verb} is allowed in "
                f"{', '.join(allowed_in(event))} [{exc}]",
                str(exc),
            )  # fmt: skip
        case _:
            return OperatorRefused(
                Refusal.CONFLICT, operation_id, event,
                f"cannot {verb} {operation_id}: it kept moving; try again", str(exc),
            )  # fmt: skip


def move_in(
    conn: Tx,
    operation_id: str,
    event: Event,
    *,
    source: Source,
    actor: str,
    correlation_id: str | None = None,
    detail: str | None = None,
    now: datetime | None = None,
) -> TransitionMade:
    """Fires the operator's `event` inside the caller's transaction (an MR command's); a retry
    restarts the sweep's budget. Raises OperatorRefused; the caller drives the change after
    its transaction commits. A Conflict (it moved under us) is raised as it is: the caller's
    transaction is the one to run again."""
    assert event in VERBS, event
    when = now or utcnow()
    try:
        return fire_in(
            conn,
            TransitionRequest(
                operation_id,
                event,
                source=source,
                actor=actor,
                correlation_id=correlation_id,
                changes=_changes(event, when, drive_now=True),
                detail=detail,
                now=when,
            ),
        )
    except (UnknownOperation, NotOwner, IllegalTransition) as exc:
        raise _refused(None, operation_id, event, exc) from None


def move(
    services: Services,
    operation_id: str,
    event: Event,
    *,
    actor: str,
    source: Source = Source.OPERATOR,
    queue_reaches_bot: bool = True,
    now: datetime | None = None,
) -> OperatorMove:
    """Fires the operator's `event` in its own transaction (re-read and tried again when it
    loses a race), then says how the change goes on: a retry is driven at once through the queue
    when this process's queue reaches the bot's workers (`queue_reaches_bot`; the CLI on the
    embedded default has no such queue, so the deadline is set to now and the running bot's next
    sweep drives it). Raises OperatorRefused."""
    assert event in VERBS, event
    when = now or utcnow()
    asked = TransitionRequest(
        operation_id,
        event,
        source=source,
        actor=actor,
        changes=_changes(event, when, drive_now=queue_reaches_bot),
        now=when,
    )
    try:
        result = with_conflict_retry(lambda: fire(services.engine, asked))
    except (UnknownOperation, NotOwner, IllegalTransition, Conflict) as exc:
        raise _refused(services, operation_id, event, exc) from None
    follow(services, result)  # cancelled while merging: the next in its merge queue goes
    if result.new_state is BindingState.MERGED:
        # a retry of a merged change waits for the deployment's word afresh (the sweep finds
        # it by its step, so a DEPLOY_PENDING it may have reached meanwhile stays as it is)
        op = load(services.engine, operation_id)
        touch(services.engine, operation_id, **deploy_deadline(services.settings, when, op))
    return OperatorMove(result, _follow_up(services, result, queue_reaches_bot))


def _follow_up(services: Services, result: TransitionMade, queue_reaches_bot: bool) -> str:
    if result.event is Event.CANCEL:
        return "the approval is withdrawn and the bot's MR closed through the outbox"
    if not queue_reaches_bot:
        return (
            "no GITOPS_REDIS_URL: the running bot's next sweep drives it"
            if result.new_state in (*STEP_STATES, *PEOPLE_STATES)
            else "it waits for the deployment's word (callback, GitLab event or reconciliation)"
        )
    return drive(services, result.operation_id)


def drive(services: Services, operation_id: str) -> str:
    """Queues the change's next step now; with the queue down the sweep drives it later."""
    try:
        services.queue.enqueue(DRIVE_JOB, operation_id, job_id=f"drive:{operation_id}")
    except QueueUnavailable:
        log.warning("queue unavailable; left to the sweep", extra={"operation_id": operation_id})
        return "the queue is down: the sweep drives it once it is back"
    return "drive job queued"


def move_text(moved: OperatorMove) -> str:
    """One line: from -> to (step), then how it goes on."""
    r = moved.transition
    before = r.old_state.value if r.old_state else "(new)"
    return (
        f"{r.event.value}: {r.operation_id} {before} -> {r.new_state.value} "
        f"({r.step.name} {r.step.value}); {moved.follow_up}"
    )
