"""`/gitops revert`, the database side: which operation a revert undoes, and starting it once.

The caller (bot/app/commands/note.py) reads GitLab in between: `revert_candidate` names the
operation, the caller builds the files that undo it (bot/app/commands/revert_files.py) and checks
their paths against the path policy (bot/app/commands/paths.py), and `revert` starts the new
request in the note's one transaction (bot/app/commands/once.py), provided the original still
owns its binding.
"""

from __future__ import annotations

import time

from bot.app.commands.once import (
    ACCEPTED,
    NO_REQUEST,
    CommandVerdict,
    Invocation,
    MrRef,
    audit_row,
    mr_operation,
    once,
    refuse_in,
    words,
)
from bot.core.events import Event, Source
from bot.core.states import REVERTIBLE, BindingState
from bot.errors import IllegalTransition, InProgress
from bot.store.commands import MrOperation, binding_of
from bot.store.engine import Engine
from bot.store.fire import record_outcome
from bot.store.submit import NewRequest, submit_in
from bot.store.tx import Tx


def revert_candidate(engine: Engine, mr: MrRef) -> MrOperation | str:
    """The MR's operation a revert would undo, or why there is none."""
    op = mr_operation(engine, mr)
    if op is None:
        return NO_REQUEST
    if not op.owner:
        return "a newer request has replaced this one (it may be a revert already)"
    if op.state not in REVERTIBLE:
        return f"only a merged change can be reverted; the request is {words(op.state)}"
    return op


def revert(
    engine: Engine, mr: MrRef, inv: Invocation, original_id: str, request: NewRequest
) -> CommandVerdict:
    """Starts `request` (which undoes `original_id`) if the original still owns its binding."""
    if request.reverts_operation_id != original_id:
        raise ValueError("the revert request must name the operation it reverts")

    def body(conn: Tx) -> CommandVerdict:
        owner, held_in = binding_of(conn, original_id)
        if owner != original_id:
            return refuse_in(conn, original_id, inv, "a newer request has replaced this one")
        started = time.perf_counter()
        try:
            moved = submit_in(
                conn,
                request,
                event=Event.REVERT,
                source=Source.COMMAND,
                actor=inv.actor,
                correlation_id=inv.correlation_id,
                operation_id=None,
                now=None,
            )
        except (InProgress, IllegalTransition):
            record_outcome(Event.REVERT, "illegal", started)
            state = BindingState(held_in)
            reason = f"only a merged change can be reverted; the request is {words(state)}"
            return refuse_in(conn, original_id, inv, reason)
        record_outcome(Event.REVERT, "success", started)
        detail = f"{ACCEPTED}reverted by operation {moved.operation_id}"
        audit_row(conn, original_id, inv.verb.value, inv.actor, inv.correlation_id, detail)
        return CommandVerdict(True, operation_id=moved.operation_id, moved=moved)

    return once(engine, mr, inv, body)
