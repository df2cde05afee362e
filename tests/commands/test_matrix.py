"""Every verb typed by every role on a person's MR: only the allowed pairs change anything."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select

from bot.core.states import BindingState as S
from bot.store.models import BINDINGS, OPERATIONS, OUTBOX
from tests.commands import (
    AUTHOR,
    BOT,
    audit_rows,
    awards,
    carry,
    flush_outbox,
    operations_of,
    person_mr,
    replies,
    say,
    to_validated,
)
from tests.workflow.harness import Bot


def status_rows(bot: Bot, op_id: str) -> int:
    """The status-comment outbox rows written for an operation."""
    query = (
        select(func.count())
        .select_from(OUTBOX)
        .where(OUTBOX.c.operation_id == op_id, OUTBOX.c.effect == "status_comment")
    )
    with bot.services.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


@dataclass(frozen=True)
class Scenario:
    """A verb with the MR state it can act on, and how to see that it acted."""

    #: prepares the MR; returns (iid, operation id or None) and anything `acted` compares with
    setup: Callable[[Bot], tuple[int, str | None, int]]
    #: True when the command changed what it should have
    acted: Callable[[Bot, int, str | None, int], bool]


def fresh_mr(bot: Bot) -> tuple[int, str | None, int]:
    """An open MR by the author that no request carries yet."""
    return person_mr(bot), None, 0


def checking(bot: Bot) -> tuple[int, str | None, int]:
    """An MR-first request on the author's MR, waiting for its check pipeline."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    flush_outbox(bot)
    return iid, op_id, status_rows(bot, op_id)


def failed(bot: Bot) -> tuple[int, str | None, int]:
    """A request stopped because its check pipeline failed."""
    iid, op_id, _ = checking(bot)
    assert op_id is not None
    bot.pass_pipeline(op_id, status="failed")
    bot.settle()
    assert bot.state(op_id) is S.CREATE_FAILED
    return iid, op_id, 0


def validated(bot: Bot) -> tuple[int, str | None, int]:
    """A request carried all the way to VALIDATED."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    to_validated(bot, op_id)
    return iid, op_id, 0


def applied(bot: Bot, iid: int, _: str | None, __: int) -> bool:
    """One MR-first request now carries the MR, and its first step ran."""
    ops = operations_of(bot, iid)
    return len(ops) == 1 and bot.state(ops[0]["id"]) is S.MR_CREATING


def refreshed(bot: Bot, _: int, op_id: str | None, rows_before: int) -> bool:
    """A new status-comment outbox row was written for the MR's request."""
    assert op_id is not None
    return status_rows(bot, op_id) == rows_before + 1


def retried(bot: Bot, _: int, op_id: str | None, __: int) -> bool:
    """The failed request went back to creating (its MR re-checked)."""
    assert op_id is not None
    return bot.state(op_id) is S.MR_CREATING


def cancelled(bot: Bot, _: int, op_id: str | None, __: int) -> bool:
    """The request is closed."""
    assert op_id is not None
    return bot.state(op_id) is S.CLOSED


def reverted(bot: Bot, iid: int, op_id: str | None, __: int) -> bool:
    """A revert request of the change now owns its subject and target."""
    assert op_id is not None
    with bot.services.engine.connect() as conn:
        reverts = conn.execute(
            select(OPERATIONS.c.id, BINDINGS.c.operation_id)
            .join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
            .where(OPERATIONS.c.reverts_operation_id == op_id)
        ).all()
    return len(reverts) == 1 and reverts[0][0] == reverts[0][1]


def helped(bot: Bot, iid: int, _: str | None, __: int) -> bool:
    """The bot replied with the help."""
    return any("GitOps commands." in body for body in replies(bot, iid))


SCENARIOS: dict[str, Scenario] = {
    "apply": Scenario(fresh_mr, applied),
    "status": Scenario(checking, refreshed),
    "retry": Scenario(failed, retried),
    "cancel": Scenario(checking, cancelled),
    "revert": Scenario(validated, reverted),
    "help": Scenario(fresh_mr, helped),
}

#: The default rules: who may run each verb (the bot's own notes never run anything).
ALLOWED: dict[str, set[str]] = {
    "apply": {AUTHOR, "maria", "dave"},
    "status": {AUTHOR, "maria", "dave"},
    "retry": {AUTHOR, "maria"},
    "cancel": {AUTHOR, "maria"},
    "revert": {"maria"},
    "help": {AUTHOR, "maria", "dave", "rita", "gus", "nora"},
}
ROLES = [AUTHOR, "maria", "dave", "rita", "gus", "nora", BOT]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("verb", list(SCENARIOS))
def test_role_by_verb(bot: Bot, verb: str, role: str) -> None:
    """Author, maintainer, developer, reporter, guest, non-member and the bot each type every
    verb: the allowed pairs act (👀), the others change nothing and are refused once (🚫), and
    the bot's own note is ignored without a reaction."""
    scenario = SCENARIOS[verb]
    iid, op_id, before = scenario.setup(bot)
    replies_before = len(replies(bot, iid))
    note = say(bot, role, f"/gitops {verb}", iid)
    expected = role in ALLOWED[verb]
    assert scenario.acted(bot, iid, op_id, before) is expected
    new_replies = replies(bot, iid)[replies_before:]
    if role == BOT:
        assert awards(bot, iid, note.id) == []
        assert new_replies == []
        [row] = audit_rows(bot, f"note:{note.id}:ignored")
        assert row["detail"] == "ignored: the bot's own comment"
    elif expected:
        assert awards(bot, iid, note.id) == ["eyes"]
        assert len(new_replies) == (1 if verb == "help" else 0)
    else:
        assert awards(bot, iid, note.id) == ["no_entry_sign"]
        [reply] = new_replies
        assert f"`/gitops {verb}` was not run: {verb} needs" in reply
        [row] = audit_rows(bot, f"note:{note.id}")
        assert (row["actor"], row["version"], row["source"]) == (role, 0, "command")
        assert row["detail"].startswith("refused: ")
