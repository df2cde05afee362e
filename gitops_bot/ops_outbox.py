"""The operator's `outbox`: the rows not yet performed (dead ones first), and `outbox retry` and
`outbox drop` of dead rows (bot/store/outbox.py does both, audited on the row's operation)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.core.events import Source
from bot.services import Services
from bot.store.outbox import OutboxRow, drop_dead, get_row, retry_dead
from gitops_bot.ops import Refused, table
from webhooks.pages import duration, utc

#: What `gitops-bot outbox list` says when nothing waits.
EMPTY = "the outbox is empty: every effect was performed"
EMPTY_DEAD = "no dead outbox rows: nothing waits for an operator"
#: The longest last error a line of the table shows (--json has it whole).
ERROR_WIDTH = 80


def list_text(rows: Sequence[OutboxRow], now: datetime, *, dead_only: bool) -> str:
    """One line a row: id, status, operation, effect, attempts, since when, the last error."""
    if not rows:
        return EMPTY_DEAD if dead_only else EMPTY
    header = ["ID", "STATUS", "OPERATION", "EFFECT", "TRIES", "WHEN (UTC)", "LAST ERROR"]
    lines = [
        [
            str(r.id),
            r.status,
            r.operation_id,
            r.effect,
            str(r.attempts),
            _when(r, now),
            _short(r.last_error or "-"),
        ]
        for r in rows
    ]
    dead = sum(1 for r in rows if r.status == "dead")
    footer = (
        f"\n{dead} dead: `gitops-bot outbox retry <id>|--all-dead` sends again, "
        "`gitops-bot outbox drop <id>` gives up"
        if dead
        else ""
    )
    return table(header, lines) + footer


def _when(row: OutboxRow, now: datetime) -> str:
    if row.dead_at is not None:
        return f"dead {utc(row.dead_at)} ({duration((now - row.dead_at).total_seconds())} ago)"
    if row.next_attempt_at <= now:
        return "due now"
    return f"next {utc(row.next_attempt_at)}"


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= ERROR_WIDTH else line[: ERROR_WIDTH - 1] + "…"


def retry(
    services: Services, ids: Sequence[int], all_dead: bool, actor: str, now: datetime
) -> list[OutboxRow]:
    """Dead rows due again now with their attempts reset; refused (nothing changed) for an id
    that is not a dead row."""
    if not all_dead:
        _all_dead(services, ids, "retry", now)
    return retry_dead(services.engine, None if all_dead else ids, now, actor, Source.OPERATOR.value)


def drop(services: Services, ids: Sequence[int], actor: str, now: datetime) -> list[OutboxRow]:
    """Dead rows given up on (never performed); refused (nothing changed) for an id that is not
    a dead row."""
    _all_dead(services, ids, "drop", now)
    return drop_dead(services.engine, ids, now, actor, Source.OPERATOR.value)


def _all_dead(services: Services, ids: Sequence[int], verb: str, now: datetime) -> None:
    for row_id in ids:
        row = get_row(services.engine, row_id)
        if row is None:
            raise Refused(f"no outbox row has the id {row_id}")
        if row.status != "dead":
            raise Refused(f"cannot {verb} outbox row {row_id}: {_why_not(row, now)}")


def _why_not(row: OutboxRow, now: datetime) -> str:
    if row.sent_at is not None:
        return f"it was sent at {utc(row.sent_at)}"
    if row.status == "dropped":
        when = "" if row.dropped_at is None else f" at {utc(row.dropped_at)}"
        return f"it was dropped by {row.dropped_by or 'an operator'}{when}"
    when = (
        "at its next run"
        if row.next_attempt_at <= now
        else f"at {utc(row.next_attempt_at)} at the latest"
    )
    return (
        f"it is not dead ({row.attempts} failed tries so far): the dispatcher tries it {when} "
        "by itself"
    )


def done_text(verb: str, rows: Sequence[OutboxRow], follow: str) -> str:
    """What `outbox retry`/`drop` did, one line a row."""
    if not rows:
        return f"nothing to {verb}: no dead outbox row"
    lines = [f"{verb}: row {r.id} ({r.effect} of {r.operation_id})" for r in rows]
    follow = follow.replace("{them}", "it" if len(rows) == 1 else "them")
    return "\n".join([*lines, follow])
