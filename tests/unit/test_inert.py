"""bot/core/inert.py: text the bot writes to GitLab runs nothing, pings nobody, hides nothing."""

from __future__ import annotations

import re

import pytest

from bot.core.inert import (
    DEFAULT_TITLE,
    TITLE_LIMIT,
    NotInert,
    ensure_inert,
    fence_for,
    inert_line,
    inert_title,
    normalise_breaks,
    outside_code,
    problems,
    quote_block,
    show_hidden,
)

#: Every line break GitLab might honour, each followed by a quick action.
BREAKS = ["\r\n", "\r", "\n", "\u2028", "\u2029", "\x0b", "\x0c", "\x85"]


@pytest.mark.parametrize("brk", BREAKS, ids=lambda b: f"U+{ord(b[-1]):04X}")
def test_every_line_break_becomes_a_newline(brk: str) -> None:
    """A quick action after any break GitLab might honour is found on a line of its own."""
    text = normalise_breaks(f"scale{brk}/merge")
    assert text == "scale\n/merge"


@pytest.mark.parametrize("brk", BREAKS, ids=lambda b: f"U+{ord(b[-1]):04X}")
def test_quoted_block_has_no_quick_action_after_any_break(brk: str) -> None:
    """A description with `/merge` after any line break quotes it on a `> ` line."""
    block = quote_block(f"please{brk}/merge{brk} /target_branch main")
    lines = block.split("\n")
    assert all(line.startswith("> ") for line in lines)
    assert "> /merge" in lines
    assert problems(block) == []


def test_quoted_block_keeps_the_text_readable() -> None:
    """The requester's lines appear unchanged inside a quoted, fenced block."""
    block = quote_block("Scale to 3.\n\n@all please review\n/label ~urgent")
    assert block == ("> ```text\n> Scale to 3.\n> \n> @all please review\n> /label ~urgent\n> ```")
    ensure_inert(block)


def test_backticks_in_the_text_cannot_close_the_fence() -> None:
    """A text with a backtick run of 5 gets a fence of 6, so its ``````` line closes nothing."""
    text = "before\n`````\n@all\n/close"
    assert fence_for(text) == "``````"
    block = quote_block(text)
    assert block.startswith("> ``````text\n")
    assert block.endswith("\n> ``````")
    assert problems(block) == []
    # the same text in a fence of three would leave `@all` live after the inner run
    assert "live mention" in " ".join(problems("> ```\n> `````\n> x\n@all"))


def test_empty_description_quotes_nothing() -> None:
    """A blank description gives no block at all rather than an empty quote."""
    assert quote_block("") == ""
    assert quote_block("\r\n \n\u2028") == ""


def test_hidden_characters_are_shown() -> None:
    """Bidi, zero-width and control characters appear as [U+XXXX], newlines stay."""
    shown = show_hidden("a\u202eb\u2066c\u200bd\x07e\nf\ufeff")
    assert shown == "a[U+202E]b[U+2066]c[U+200B]d[U+0007]e\nf[U+FEFF]"
    assert problems(shown) == []


def test_tabs_in_a_block_become_spaces() -> None:
    """A tab (a control character) is expanded in a quoted block, not shown as [U+0009]."""
    assert quote_block("key:\tvalue") == "> ```text\n> key:    value\n> ```"


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ("/label ~x", "\uff0flabel ~x"),
        ("  /target_branch main", "\uff0ftarget_branch main"),
        ("\r/merge", "\uff0fmerge"),
        ("ping @all and @group/sub", "ping \uff20all and \uff20group/sub"),
        ("eve/@all", "eve/\uff20all"),
        ("rtl \u202eevil\u202c", "rtl [U+202E]evil[U+202C]"),
        ("two\nlines\u2028here", "two lines here"),
        ("a\t\tb", "a b"),
        ("\u200b/close", "[U+200B]/close"),
    ],
)
def test_inert_line(raw: str, line: str) -> None:
    """A single line: no break, leading `/` as a look-alike, `@` as a look-alike, hidden shown."""
    assert inert_line(raw) == line
    ensure_inert(line, markdown=False)


def test_inert_title_fits_gitlab_and_is_never_blank() -> None:
    """A title of 255 bidi characters (2,040 once shown) is cut to 255; a blank one is named."""
    title = inert_title("\u202e" * 255)
    assert len(title) == TITLE_LIMIT
    assert title.endswith("…")
    assert inert_title(" \u2028 ") == DEFAULT_TITLE


def test_inert_line_is_idempotent() -> None:
    """Making an inert line inert again changes nothing (the seam re-applies it)."""
    once = inert_title("/close @all \u202e x")
    assert inert_title(once) == once


@pytest.mark.parametrize(
    ("text", "markdown", "problem"),
    [
        ("fine\n/merge", True, "line 2 starts with '/'"),
        ("fine\n \u00a0 /merge", True, "line 2 starts with '/'"),
        ("hi @all", True, "live mention"),
        ("hi &#64;all", True, "live mention"),
        ("hi \\@all", True, "live mention"),
        ("`x` @group/sub `y`", True, "live mention"),
        ("title @all", False, "live mention"),
        ("title `@all`", False, "live mention"),
        ("abc\u202edef", False, "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("zero\u200bwidth", True, "U+200B ZERO WIDTH SPACE"),
        ("cr\r/merge", True, "U+000D"),
        ("ls\u2028x", True, "U+2028 LINE SEPARATOR"),
    ],
)
def test_ensure_inert_names_the_problem(text: str, markdown: bool, problem: str) -> None:
    """ensure_inert refuses live text with a ValueError that says what is wrong."""
    with pytest.raises(NotInert, match=re.escape(problem)) as caught:
        ensure_inert(text, markdown=markdown)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "text",
    [
        "`@gitops-bot <command>` works too.",
        "| `/gitops apply` | Starts the change | Developer |",
        "> ```text\n> @all\n> /close\n> ```\n\nRequested by eve/\uff20all.",
        "```mermaid\nA --> B\n```",
        "Scale to 3 (alice\uff20example.com)",
        "email me: a @ b",
    ],
)
def test_ensure_inert_accepts_what_the_bot_writes(text: str) -> None:
    """Code spans, quoted fenced blocks, look-alike `@` and table rows pass the check."""
    ensure_inert(text)


def test_a_quoted_fence_ends_with_its_quote() -> None:
    """Text after the blockquote that held an unclosed fence is outside code again."""
    assert outside_code("> ```\n> @all\nafter @x") == "after @x"
    assert "live mention" in " ".join(problems("> ```\n> @all\nafter @x"))
