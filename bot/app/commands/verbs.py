"""What each MR command does to the database, once per note, with its audit row.

Each verb runs in the note's one transaction (`once`, bot/app/commands/once.py), which runs
a note's command once however often it is delivered and audits what it decided; `/gitops
revert` lives in bot/app/commands/revert.py. Callers import every command from here. No
GitLab call is made here: the caller reads first.
"""

from __future__ import annotations

import time

from bot.app import operator
from bot.app.commands.once import (
    ACCEPTED,
    NO_REQUEST,
    CommandVerdict,
    Invocation,
    MrRef,
    audit_key,
    audit_row,
    mr_operation,
    mr_operations,
    note_correlation,
    once,
    previous,
    record_ignored,
    refuse_in,
    words,
)
from bot.app.commands.revert import revert, revert_candidate
from bot.core.events import Event, Source
from bot.core.states import FAILED
from bot.errors import Conflict, IllegalTransition, InProgress
from bot.store.commands import MrOperation, queue_status_comment
from bot.store.engine import Engine
from bot.store.fire import record_outcome
from bot.store.operations import bind_maintainer_head
from bot.store.submit import NewRequest, submit_in
from bot.store.tx import Tx

__all__ = [
    "CommandVerdict",
    "Invocation",
    "MrOperation",
    "MrRef",
    "accept",
    "apply",
    "audit_key",
    "cancel",
    "mr_operation",
    "mr_operations",
    "note_correlation",
    "previous",
    "record_ignored",
    "refuse",
    "retry",
    "revert",
    "revert_candidate",
    "status",
]


def refuse(engine: Engine, mr: MrRef, inv: Invocation, reason: str) -> CommandVerdict:
    """Records a refused command (not allowed, malformed, nothing to act on)."""

    def body(conn: Tx) -> CommandVerdict:
        return refuse_in(conn, _key(conn, mr), inv, reason)

    return once(engine, mr, inv, body)


def accept(engine: Engine, mr: MrRef, inv: Invocation, detail: str = "") -> CommandVerdict:
    """Records an accepted command that changes nothing (help)."""

    def body(conn: Tx) -> CommandVerdict:
        key = _key(conn, mr)
        audit_row(conn, key, inv.verb.value, inv.actor, inv.correlation_id, ACCEPTED + detail)
        return CommandVerdict(True, operation_id=None if key.startswith("mr:") else key)

    return once(engine, mr, inv, body)


def _key(conn: Tx, mr: MrRef) -> str:
    found = mr_operations(conn, mr)
    return found[0].id if found else mr.key


def _detail(inv: Invocation) -> str:
    """The transition's detail: the command as typed, and its note."""
    return f"{inv.line or '/gitops ' + inv.verb.value} (note {inv.note_id})"


def status(engine: Engine, mr: MrRef, inv: Invocation) -> CommandVerdict:
    """Queues a re-render of the MR's status comment (a `status_comment` outbox row)."""

    def body(conn: Tx) -> CommandVerdict:
        found = mr_operations(conn, mr)
        if not found:
            return refuse_in(conn, mr.key, inv, NO_REQUEST)
        op = found[0]
        queue_status_comment(conn, op.id)
        detail = ACCEPTED + "status comment queued"
        audit_row(conn, op.id, inv.verb.value, inv.actor, inv.correlation_id, detail, op.state)
        return CommandVerdict(True, operation_id=op.id)

    return once(engine, mr, inv, body)


def _move(engine: Engine, mr: MrRef, inv: Invocation, event: Event) -> CommandVerdict:
    """Fires `event` for the MR's operation as the commenter; refuses what the table refuses."""

    def body(conn: Tx) -> CommandVerdict:
        found = mr_operations(conn, mr)
        if not found:
            return refuse_in(conn, mr.key, inv, NO_REQUEST)
        op = found[0]
        if not op.owner:
            return refuse_in(conn, op.id, inv, "a newer request has replaced this one")
        started = time.perf_counter()
        try:  # the operator's retry and cancel, as the API's and the CLI's (bot/app/operator.py)
            moved = operator.move_in(
                conn,
                op.id,
                event,
                source=Source.COMMAND,
                actor=inv.actor,
                correlation_id=inv.correlation_id,
                detail=_detail(inv),
            )
        except operator.OperatorRefused as refused:
            if refused.kind is operator.Refusal.ILLEGAL:
                record_outcome(event, "illegal", started)
                reason = f"{inv.verb.value} is not possible while the request is {words(op.state)}"
                return refuse_in(conn, op.id, inv, reason)
            record_outcome(event, "stale", started)
            return refuse_in(conn, op.id, inv, "a newer request has replaced this one")
        except Conflict:
            record_outcome(event, "conflict", started)
            raise
        record_outcome(event, "success", started)
        return CommandVerdict(True, operation_id=op.id, moved=moved)

    return once(engine, mr, inv, body)


def retry(engine: Engine, mr: MrRef, inv: Invocation) -> CommandVerdict:
    """Re-drives the step where the MR's request stopped (RETRY through the table)."""
    return _move(engine, mr, inv, Event.RETRY)


def cancel(engine: Engine, mr: MrRef, inv: Invocation) -> CommandVerdict:
    """Closes the MR's request (CANCEL: the outbox withdraws the approval, closes the bot's MR)."""
    return _move(engine, mr, inv, Event.CANCEL)


def apply(
    engine: Engine,
    mr: MrRef,
    inv: Invocation,
    request: NewRequest,
    *,
    maintainer_head: str | None = None,
) -> CommandVerdict:
    """Registers the MR as an MR-first request (a re-apply after REJECTED/CLOSED included).
    `maintainer_head`: the MR head a Maintainer's command was given at, recorded on the new
    request in the same transaction (their authority covers that head only)."""

    def body(conn: Tx) -> CommandVerdict:
        found = mr_operations(conn, mr)
        bots = [op for op in found if op.mr_opened_by_bot]
        if bots:
            reason = f"this merge request was opened by the bot for operation {bots[0].id}"
            return refuse_in(conn, bots[0].id, inv, reason)
        key = found[0].id if found else mr.key
        started = time.perf_counter()
        try:
            moved = submit_in(
                conn,
                request,
                event=Event.SUBMIT,
                source=Source.COMMAND,
                actor=inv.actor,
                correlation_id=inv.correlation_id,
                operation_id=None,
                now=None,
            )
        except InProgress as exc:
            record_outcome(Event.SUBMIT, "illegal", started)
            return refuse_in(conn, key, inv, _in_progress(found, str(exc.args[0])))
        except IllegalTransition as exc:
            record_outcome(Event.SUBMIT, "illegal", started)
            return refuse_in(conn, key, inv, str(exc))
        if request.maintainer_request and maintainer_head:
            bind_maintainer_head(conn, moved.operation_id, maintainer_head)
        record_outcome(Event.SUBMIT, "success", started)
        return CommandVerdict(True, operation_id=moved.operation_id, moved=moved)

    return once(engine, mr, inv, body)


def _in_progress(found: list[MrOperation], operation_id: str) -> str:
    """Why a new request cannot start: one is in flight, or stopped on a failure."""
    state = next((op.state for op in found if op.id == operation_id), None)
    if state in FAILED:
        return (
            f"the request stopped on a failure (operation {operation_id}); "
            "use /gitops retry or /gitops cancel"
        )
    return f"already in progress (operation {operation_id})"
