"""The approval callback guard: only the owner, while it waits for approval, moves.

And only by its own approval: a callback whose approval id, ext.mrId or ext.change.digest is
not the operation's is a mismatch (audited, counted in gitops_callback_mismatch_total).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.app.events.handled import EventHandled
from bot.app.events.mismatch import record_mismatch
from bot.app.events.stale import record_stale
from bot.approval.callback import ApprovalCallback
from bot.approval.decision import Decision
from bot.core.events import Event, Source
from bot.core.request import TransitionRequest
from bot.core.states import AWAITING_APPROVAL
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.store.engine import Engine
from bot.store.fire import CurrentState, fire
from bot.store.lookups import change_identity, read_current

_EVENTS = {
    Decision.APPROVED: Event.APPROVED,
    Decision.REJECTED: Event.REJECTED,
    Decision.WITHDRAWN: Event.WITHDRAWN,
}

ACTOR = "approval-system"


def on_approval(engine: Engine, callback: ApprovalCallback, attempts: int = 3) -> EventHandled:
    """Moves the owning operation by the decision, or records the callback as stale."""
    event = _EVENTS.get(callback.decision)
    op_id = callback.operation_id

    def stale(reason: str, state: str | None = None) -> EventHandled:
        return record_stale(
            engine,
            op_id,
            event or Event.APPROVED,  # a decision that is not final is audited as APPROVED
            reason,
            source=Source.WEBHOOK,
            state=state,
            correlation_id=callback.request_id,
        )

    if event is None:
        return stale(f"decision {callback.decision} is not final")
    for _ in range(attempts):
        try:
            current = read_current(engine, op_id)
        except UnknownOperation:
            return stale("unknown operation")
        except NotOwner:
            return stale("the operation was replaced by a re-apply")
        state = current.state.value
        why_not = _not_waiting(current, callback)
        if why_not is not None:
            return stale(why_not, state)
        mismatch = _mismatch(engine, callback, current.guard_values)
        if mismatch is not None:
            return record_mismatch(
                engine,
                op_id,
                event,
                mismatch,
                source="approval",
                state=state,
                correlation_id=callback.request_id,
            )
        changes = (
            {} if current.guard_values.get("approval_id") else {"approval_id": callback.approval_id}
        )
        try:
            moved = fire(
                engine,
                TransitionRequest(
                    op_id,
                    event,
                    source=Source.WEBHOOK,
                    actor=ACTOR,
                    correlation_id=callback.request_id,
                    changes=changes,
                ),
                current=current,
            )
        except Conflict:
            continue  # someone moved it meanwhile (our SENT write): read again
        except IllegalTransition as exc:
            return stale(str(exc), state)
        return EventHandled(op_id, moved=moved)
    return stale(f"still racing after {attempts} attempts")


def _not_waiting(current: CurrentState, callback: ApprovalCallback) -> str | None:
    """Why the operation is not waiting for this decision (None: it is)."""
    if current.state not in AWAITING_APPROVAL:
        return f"not waiting for approval ({current.state.value})"
    if current.flow != callback.flow:
        return f"the payload's shape says {callback.flow}, the operation is {current.flow}"
    return None


def _mismatch(engine: Engine, callback: ApprovalCallback, values: Mapping[str, Any]) -> str | None:
    """Why the callback is not about this operation's approval (None: it is).

    The stored approval id (once the submission is recorded), the MR (ext.mrId) and the
    change identity's digest (ext.change.digest) must each be the operation's, where both
    sides have one.
    """
    stored = values.get("approval_id")
    if stored and stored != callback.approval_id:
        return f"approval id mismatch: the callback is for {callback.approval_id}, not {stored}"
    mr_iid = values.get("mr_iid")
    if callback.mr_iid is not None and mr_iid is not None and callback.mr_iid != mr_iid:
        return f"MR mismatch: the callback's ext.mrId is !{callback.mr_iid}, not !{mr_iid}"
    if callback.change_digest is None:
        return None
    identity = change_identity(engine, callback.operation_id)
    digest = identity.get("digest") if isinstance(identity, dict) else None
    if isinstance(digest, str) and digest.lower() != callback.change_digest:
        return (
            f"change digest mismatch: the callback approves {callback.change_digest[:12]}…, "
            f"the change is {digest[:12]}…"
        )
    return None
