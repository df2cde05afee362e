"""The bot's replies to commands are inert: no quick action, no live mention, nothing hidden."""

from __future__ import annotations

import pytest

from bot.app.commands import reply as command_reply
from bot.app.commands.reply import code_span, reason_markup
from bot.core.inert import ensure_inert
from tests.commands import awards, person_mr, replies, say
from tests.workflow.harness import Bot

#: What a person typed, and the code span the reply shows of it (None: shown as escaped text).
TYPED = {
    "/gitops @all": None,
    "/gitops `@all`": "`@all`",
    "/gitops ``/merge``": "`/merge`",
    "/gitops <b>@x</b>": None,
}


def test_an_unknown_verb_with_a_mention_is_answered_inertly(bot: Bot) -> None:
    """`/gitops @all` and friends are answered with the help; each reply names the word without
    a live mention, a quick action or markup (code the person typed stays code), and passes the
    inert check."""
    for n, (typed, span) in enumerate(TYPED.items()):
        iid = person_mr(bot, f"branch-{n}")
        note = say(bot, "nora", typed, iid)
        assert awards(bot, iid, note.id) == ["no_entry_sign"]
        [reply] = replies(bot, iid)
        assert "Your command was not run: unknown command" in reply
        ensure_inert(reply)
        assert "<b>" not in reply
        if span is not None:
            assert f"unknown command '{span}'" in reply


def test_a_path_cannot_end_its_code_span_or_break_its_line() -> None:
    """Backticks get a longer fence, a newline and a bidi control are shown as `[U+XXXX]`, and
    the reason around the span is escaped text."""
    assert code_span("a``b") == "```a``b```"
    assert code_span("`x") == "`` `x ``"
    assert code_span("a\nb\u202ec") == "`a[U+000A]b[U+202E]c`"
    shown = reason_markup(f"paths: {code_span('.gitlab/@all')}: is *protected*; /x")
    assert shown == "paths: `.gitlab/@all`: is \\*protected\\*; /x"
    ensure_inert(str(shown))


def test_a_reply_that_is_not_inert_is_never_posted(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the escaping ever fail (a reply with a quick-action line), the reply is not posted;
    the reaction is still given and the person's reply window stays open."""
    monkeypatch.setattr(command_reply, "render_reply", lambda **_: "ok\n/merge\n")
    iid = person_mr(bot)
    note = say(bot, "nora", "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    assert bot.gitlab.count("POST", path_endswith="/notes") == 0
    monkeypatch.undo()
    again = say(bot, "nora", "/gitops apply", iid)
    [reply] = replies(bot, iid)
    assert f"gitops-bot:reply:{again.id}" in reply
