"""`/gitops apply` and `/gitops revert` honour the same overload bound as the REST API."""

from __future__ import annotations

from sqlalchemy import select

from bot.store.flags import DEFAULTS, set_flag
from bot.store.models import OPERATIONS
from tests.commands import (
    AUTHOR,
    audit_rows,
    awards,
    carry,
    operations_of,
    person_mr,
    replies,
    say,
    to_validated,
)
from tests.workflow.harness import Bot

FULL = "the work queue is full; nothing was started, retry later"


def fill_queue(bot: Bot, full: bool) -> None:
    """Sets the bound to 0 (any queue is full) or back to its default."""
    set_flag(bot.services.engine, "queue.max_length", 0 if full else DEFAULTS["queue.max_length"])


def test_apply_is_refused_while_the_queue_is_full_then_runs(bot: Bot) -> None:
    """At the bound: 🚫, one reply saying why, an audit row, no request. Below it: applied."""
    iid = person_mr(bot)
    fill_queue(bot, True)
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert f"`/gitops apply` was not run: {FULL}" in reply
    assert operations_of(bot, iid) == []
    [row] = audit_rows(bot, f"note:{note.id}")
    assert row["detail"] == f"refused: {FULL}"
    fill_queue(bot, False)
    again = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, again.id) == ["eyes"]
    assert len(operations_of(bot, iid)) == 1


def test_revert_is_refused_while_the_queue_is_full(bot: Bot) -> None:
    """A maintainer's revert at the bound starts nothing; the change stays as it is."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    to_validated(bot, op_id)
    fill_queue(bot, True)
    note = say(bot, "maria", "/gitops revert", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    assert any(FULL in body for body in replies(bot, iid))
    with bot.services.engine.connect() as conn:
        reverts = conn.execute(
            select(OPERATIONS.c.id).where(OPERATIONS.c.reverts_operation_id == op_id)
        ).all()
    assert reverts == []
