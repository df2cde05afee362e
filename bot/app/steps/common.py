"""Moving an operation from a step: a transition another event beat us to is not an error."""

from __future__ import annotations

import logging
from typing import Any

from bot.app.queue import follow
from bot.app.steps import StepContext
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.errors import Conflict, IllegalTransition, NotOwner
from bot.heartbeat import beat
from bot.store.fire import TransitionMade, fire

log = logging.getLogger(__name__)


def advance(ctx: StepContext, event: Event, **changes: Any) -> bool:
    """Fires `event` for the step's operation; False when something else moved it first."""
    return advance_made(ctx, event, **changes) is not None


def advance_made(ctx: StepContext, event: Event, **changes: Any) -> TransitionMade | None:
    """advance(), returning the transition (None when something else moved it first)."""
    if "attempts" not in changes:
        changes["attempts"] = 0  # progress made: the sweep's budget starts again
    beat()  # a step that lost its lease stops here (LeaseLost) instead of writing
    try:
        made = fire(
            ctx.services.engine,
            TransitionRequest(
                ctx.op.id,
                event,
                expected_version=ctx.op.version,
                source=Source.JOB,
                actor="gitops-bot",
                changes=changes,
            ),
        )
    except (Conflict, IllegalTransition, NotOwner) as exc:
        log.info("step result not applied: %s", exc, extra={"operation_id": ctx.op.id})
        return None
    follow(ctx.services, made)  # out of MERGING: the next in its merge queue goes now
    return made


def short(error: BaseException, limit: int = 500) -> str:
    """An error as one short line for error_detail and the status comment."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:limit]
