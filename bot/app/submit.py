"""Submitting a change through the REST API: the use case behind `POST /api/v1/changes`.

`submit_change` records the request as one operation (or finds it again by its idempotency key),
writes the explicit overload failure when the queue is at its bound, and queues its drive. What
refuses is one `SubmitRefused` with a kind that the door words for its audience (the blueprint:
a status code). `/gitops apply` starts its request inside the note's transaction (`submit_in`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from bot.app.events.overload import QUEUE_FULL, queue_full
from bot.app.operator import drive
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState, Step
from bot.errors import Conflict, IllegalTransition, InProgress, NotOwner
from bot.services import Services
from bot.store.fire import fire, with_conflict_retry
from bot.store.queries import IdempotentHit, operation_by_idempotency_key, operation_view
from bot.store.submit import NewRequest, submit

log = logging.getLogger(__name__)


class SubmitRefusal(StrEnum):
    """Why a submission was not accepted."""

    KEY_REUSED = "idempotency_key_reused"  # the key was used for a different request
    IN_PROGRESS = "in_progress"  # a request for the same subject and target is in flight
    CONFLICT = "conflict"  # the subject and target kept moving; trying again may work
    ILLEGAL = "illegal_transition"  # the table refuses a new request where the binding stands
    OVERLOADED = "overloaded"  # the queue is at its bound: recorded as failed, retry later


class SubmitRefused(Exception):
    """A submission refused; `operation_id` names the operation it concerns, if there is one."""

    def __init__(self, kind: SubmitRefusal, message: str, *, operation_id: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.operation_id = operation_id


@dataclass(frozen=True, slots=True)
class Accepted:
    """The operation that carries the request; `replayed` when its idempotency key found it."""

    operation_id: str
    replayed: bool


def submit_change(
    services: Services,
    new: NewRequest,
    *,
    source: Source = Source.API,
    actor: str | None = None,
) -> Accepted:
    """Records `new` (keyed by `new.idempotency_key`, bound to `new.request_hash`) and queues
    its drive. Raises SubmitRefused."""
    who = actor or new.requested_by
    key = new.idempotency_key
    if key is not None and (hit := operation_by_idempotency_key(services.engine, key)):
        return _replay(services, hit, new.request_hash, source, who)
    overloaded = queue_full(services.engine, services.queue)  # read before the write
    try:
        result = with_conflict_retry(lambda: submit(services.engine, new, source=source, actor=who))
    except (InProgress, Conflict) as exc:
        # two requests with one key at once: the loser finds the winner's operation
        if key is not None and (hit := operation_by_idempotency_key(services.engine, key)):
            return _replay(services, hit, new.request_hash, source, who)
        if isinstance(exc, InProgress):
            raise SubmitRefused(
                SubmitRefusal.IN_PROGRESS,
                f"a request for {new.subject_id} -> {new.target_key} is in progress",
                operation_id=exc.args[0],
            ) from None
        raise SubmitRefused(
            SubmitRefusal.CONFLICT, "the subject and target changed meanwhile; try again"
        ) from None
    except IllegalTransition as exc:
        raise SubmitRefused(SubmitRefusal.ILLEGAL, str(exc)) from None
    op_id = result.operation_id
    log.info("change accepted", extra={"operation_id": op_id, "subject_id": new.subject_id})
    if overloaded and _fail_overloaded(services, op_id, source, who):
        raise _overload_refusal(op_id)
    drive(services, op_id)
    return Accepted(op_id, replayed=False)


def _replay(
    services: Services, hit: IdempotentHit, digest: str | None, source: Source, actor: str
) -> Accepted:
    """A repeated idempotency key: the first operation again, refused when the request differs.

    A request refused as overloaded is the exception: its client was told to try again, so
    the repeat retries the recorded operation once the queue has room.
    """
    if hit.request_hash != digest:
        raise SubmitRefused(
            SubmitRefusal.KEY_REUSED,
            "this Idempotency-Key was used for a different request",
            operation_id=hit.operation_id,
        )
    view = operation_view(services.engine, hit.operation_id, with_history=False)
    if (
        view is not None
        and view.owns_binding
        and view.phase is BindingState.CREATE_FAILED
        and view.step is Step.CREATE_OVERLOADED
    ):
        if queue_full(services.engine, services.queue):
            raise _overload_refusal(hit.operation_id)
        retry = TransitionRequest(hit.operation_id, Event.RETRY, source=source, actor=actor)
        try:
            with_conflict_retry(lambda: fire(services.engine, retry))
        except (Conflict, IllegalTransition, NotOwner):
            # someone (an operator, the other copy of this request) moved it first: it goes on
            log.info("overloaded operation already moved", extra={"operation_id": hit.operation_id})
        drive(services, hit.operation_id)
    return Accepted(hit.operation_id, replayed=True)


def _overload_refusal(operation_id: str) -> SubmitRefused:
    return SubmitRefused(
        SubmitRefusal.OVERLOADED,
        f"{QUEUE_FULL}; the request was recorded as failed, retry later",
        operation_id=operation_id,
    )


def _fail_overloaded(services: Services, operation_id: str, source: Source, actor: str) -> bool:
    """Writes the explicit overload failure; False if the operation moved first (it goes on)."""
    failed = TransitionRequest(operation_id, Event.OVERLOADED, source=source, actor=actor)
    try:
        with_conflict_retry(lambda: fire(services.engine, failed))
    except (Conflict, IllegalTransition, NotOwner):
        log.warning("could not mark overloaded", extra={"operation_id": operation_id})
        return False
    return True
