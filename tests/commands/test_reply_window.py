"""Replies are rate-limited per user and MR (one per GITOPS_REPLY_WINDOW); reactions never are."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from bot.app.commands.note import on_note
from bot.app.commands.reply_limit import claim_reply
from bot.ingress.gitlab_events import NoteEvent, parse
from bot.store.models import COMMAND_REPLIES, utcnow
from tests.commands import awards, person_mr, replies, say
from tests.workflow.harness import PROJECT, Bot


def age_replies(bot: Bot, seconds: float) -> None:
    """Moves every recorded reply `seconds` into the past (as if that much time went by)."""
    table = COMMAND_REPLIES
    with bot.services.engine.begin() as conn:
        for row in conn.execute(select(table.c.id, table.c.last_reply_at)).all():
            earlier = row.last_reply_at - timedelta(seconds=seconds)
            conn.execute(update(table).where(table.c.id == row.id).values(last_reply_at=earlier))


def test_twenty_refusals_by_a_non_member_get_twenty_reactions_and_one_reply(bot: Bot) -> None:
    """A non-member types `/gitops apply` 20 times on one MR: every note gets 🚫, the bot
    replies once."""
    iid = person_mr(bot)
    notes = [say(bot, "nora", "/gitops apply", iid) for _ in range(20)]
    assert [awards(bot, iid, n.id) for n in notes] == [["no_entry_sign"]] * 20
    assert len(replies(bot, iid)) == 1
    assert bot.gitlab.count("POST", "/notes", path_endswith="/notes") == 1


def test_a_member_gets_one_reply_per_window_refusal_or_help(bot: Bot) -> None:
    """A Reporter's refused apply is answered; their help and a second refusal on the same MR
    within the window get their reaction only."""
    iid = person_mr(bot)
    first = say(bot, "rita", "/gitops apply", iid)
    helped = say(bot, "rita", "/gitops help", iid)
    again = say(bot, "rita", "/gitops cancel", iid)
    assert awards(bot, iid, first.id) == ["no_entry_sign"]
    assert awards(bot, iid, helped.id) == ["eyes"]
    assert awards(bot, iid, again.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert f"gitops-bot:reply:{first.id}" in reply


def test_the_window_is_per_user_and_per_mr(bot: Bot) -> None:
    """Another person on the same MR, and the same person on another MR, each get their reply."""
    one = person_mr(bot, "one")
    two = person_mr(bot, "two")
    say(bot, "nora", "/gitops help", one)
    say(bot, "gus", "/gitops help", one)
    say(bot, "nora", "/gitops help", two)
    assert len(replies(bot, one)) == 2
    assert len(replies(bot, two)) == 1


def test_after_the_window_the_next_refusal_is_answered(bot: Bot) -> None:
    """Once GITOPS_REPLY_WINDOW has passed since the last reply, the next one is posted."""
    iid = person_mr(bot)
    say(bot, "nora", "/gitops apply", iid)
    say(bot, "nora", "/gitops apply", iid)
    assert len(replies(bot, iid)) == 1
    age_replies(bot, bot.settings.reply_window - 5)
    say(bot, "nora", "/gitops apply", iid)
    assert len(replies(bot, iid)) == 1
    age_replies(bot, 10)
    last = say(bot, "nora", "/gitops apply", iid)
    assert len(replies(bot, iid)) == 2
    assert f"gitops-bot:reply:{last.id}" in replies(bot, iid)[-1]


@pytest.mark.pg
def test_concurrent_claims_give_one_reply(db: Engine) -> None:
    """Twenty workers answering one person's commands on one MR at the same moment: exactly one
    may reply (the claim is one atomic statement)."""
    now = utcnow()
    start = threading.Barrier(20)
    won: list[bool] = []
    lock = threading.Lock()

    def claim() -> None:
        start.wait(timeout=10)
        got = claim_reply(db, project_id=1, mr_iid=2, user_id=3, window=600, now=now)
        with lock:
            won.append(got)

    threads = [threading.Thread(target=claim) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(won) == [False] * 19 + [True]


@pytest.mark.pg
def test_concurrent_commands_by_one_person_get_one_reply(bot: Bot) -> None:
    """Ten refused commands by one non-member on one MR, processed by ten workers at once: ten
    reactions, one reply."""
    iid = person_mr(bot)
    notes = [bot.gitlab.add_note(PROJECT, iid, "nora", "/gitops cancel") for _ in range(10)]
    events = []
    for note in notes:
        _, body = bot.gitlab.webhook("note", project=PROJECT, iid=iid, note_id=note.id)
        event = parse("Note Hook", json.loads(body))
        assert isinstance(event, NoteEvent)
        events.append(event)
    start = threading.Barrier(len(events))
    errors: list[BaseException] = []

    def work(event: NoteEvent) -> None:
        start.wait(timeout=10)
        try:
            on_note(bot.services, event)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(e,)) for e in events]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert [awards(bot, iid, n.id) for n in notes] == [["no_entry_sign"]] * 10
    assert len(replies(bot, iid)) == 1
