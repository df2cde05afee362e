"""An operator moves a merging change to the front of its branch's merge queue: for the REST API
(`POST /api/v1/changes/<id>/promote`) and the CLI (`gitops-bot queue promote`).

No transition: the change stays MERGING, only its place in the line changes
(bot/store/queue.py's `promote`, which also queues the status comments of the promoted change
and of the change driven as the head until then), and the audit log records who did it. Then
the line's head is driven: at once through the queue when this process's queue reaches the
bot's workers, else by the running bot's next sweep (its deadline set to now), as for a retry
(bot/app/operator.py). A refusal is the operator's `OperatorRefused`: no such change, replaced
by a newer request, or in no line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.app.operator import OperatorRefused, Refusal
from bot.app.queue import move_up
from bot.core.events import Source
from bot.core.states import BindingState
from bot.render.status import load_status
from bot.services import Services
from bot.store import queue as line
from bot.store.audit import record_unmoved
from bot.store.models import utcnow
from bot.store.operations import touch


@dataclass(frozen=True, slots=True)
class Promotion:
    """What a promotion did: the change's new place, and how the line goes on."""

    place: line.Place
    follow_up: str


def promote(
    services: Services,
    operation_id: str,
    *,
    actor: str,
    source: Source = Source.OPERATOR,
    queue_reaches_bot: bool = True,
    now: datetime | None = None,
) -> Promotion:
    """Moves the change to the front of its merge queue and has the line's head driven; its new
    place. Raises OperatorRefused (NOT_FOUND, STALE, NOT_QUEUED) having changed nothing."""
    when = now or utcnow()
    engine = services.engine
    promoted = line.promote(engine, operation_id) if line.place(engine, operation_id) else None
    if promoted is None:
        raise _refused(services, operation_id)
    record_unmoved(
        engine,
        operation_id=operation_id,
        event=line.PROMOTE_EVENT,
        source=source.value,
        detail=f"promoted to the front of {promoted.target_branch}'s merge queue",
        state=BindingState.MERGING.value,
        actor=actor,
    )
    return Promotion(promoted, _drive(services, promoted, queue_reaches_bot, when))


def _drive(services: Services, place: line.Place, queue_reaches_bot: bool, now: datetime) -> str:
    """Has the line's new head driven; how it goes on, in words."""
    if place.head is None:
        return "every change in the line waits for its pipeline: the first to pass merges"
    then = "" if place.is_head else f"{place.head} merges next; "  # it is paused
    if not queue_reaches_bot:
        touch(services.engine, place.head, deadline_at=now)
        return then + "no GITOPS_REDIS_URL: the running bot's next sweep drives it"
    if move_up(services, place.project, place.target_branch, now) is None:
        return then + "the head of the line is being driven already"
    return then + "drive job queued"


def _refused(services: Services, operation_id: str) -> OperatorRefused:
    """Why the change cannot be promoted: unknown, replaced, or in no merge queue."""
    view = load_status(services.engine, operation_id)
    if view is None:
        return OperatorRefused(
            Refusal.NOT_FOUND, operation_id, None,
            f"no operation has the id {operation_id!r}", "unknown operation",
        )  # fmt: skip
    if not view.owns_binding:
        return OperatorRefused(
            Refusal.STALE, operation_id, None,
            f"cannot promote {operation_id}: a newer request for the same subject and target "
            "replaced it (act on that one)",
            "not the owner of its binding",
        )  # fmt: skip
    return OperatorRefused(
        Refusal.NOT_QUEUED, operation_id, None,
        f"cannot promote {operation_id}: it is in no merge queue (it is {view.phase.value}, "
        f"{view.step.name}); a change waits in line only while it is MERGING",
        f"it is {view.phase.value} ({view.step.name}): only a MERGING change waits in a merge "
        "queue",
    )  # fmt: skip
