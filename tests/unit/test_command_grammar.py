"""The MR command grammar and the permission rules (pure: bot/core/commands.py)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.commands import (
    MAX_LINE,
    Command,
    Rules,
    Verb,
    allowed,
    parse_command,
    rules_from,
)

BOT = "gitops-bot"


def parse(text: str) -> Command | None:
    """The command in `text` for a bot named gitops-bot."""
    return parse_command(text, BOT)


def verb_of(text: str) -> Verb | None:
    """The verb of the command in `text` when it can run as typed, else None."""
    found = parse(text)
    return found.verb if found is not None and found.problem is None else None


# -- what forms a command ------------------------------------------------------------------------


@pytest.mark.parametrize("verb", list(Verb))
def test_each_verb_in_slash_and_mention_form(verb: Verb) -> None:
    """`/gitops <verb>` and `@gitops-bot <verb>` both name the verb, with no problem."""
    slash, mention = parse(f"/gitops {verb}"), parse(f"@gitops-bot {verb}")
    assert slash == Command(verb, (), f"/gitops {verb}", None, "slash")
    assert mention == Command(verb, (), f"@gitops-bot {verb}", None, "mention")


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("Looks good.\n/gitops apply", Verb.APPLY),
        ("   /gitops status", Verb.STATUS),
        ("/gitops \t retry  ", Verb.RETRY),
        ("thanks\r\n/gitops cancel\r\n", Verb.CANCEL),
        ("@GitOps-Bot status", Verb.STATUS),
        ("> quoted\n\n/gitops apply", Verb.APPLY),
        ("```\ncode\n```\n/gitops apply", Verb.APPLY),
        (">>>\nquoted\n>>>\n/gitops apply", Verb.APPLY),
        ("<!-- hidden -->\n/gitops apply", Verb.APPLY),
        ("@gitops-bot thanks!\n/gitops apply", Verb.APPLY),
    ],
)
def test_commands_outside_quotes_and_code(text: str, verb: Verb) -> None:
    """A command on a line of its own is found after prose, closed quotes, code and comments."""
    assert verb_of(text) is verb


@pytest.mark.parametrize(
    "text",
    [
        "> /gitops apply",
        "  > /gitops apply",
        "> someone said\n/gitops apply",  # a lazy continuation line belongs to the quote
        ">>>\n/gitops apply\n>>>",
        ">>>\n/gitops apply",
        "```\n/gitops apply\n```",
        "~~~yaml\n/gitops apply\n~~~",
        "```\n/gitops apply",  # an unclosed fence runs to the end
        "````\n```\n/gitops apply\n````",  # a shorter fence does not close it
        "~~~\n```\n/gitops apply\n~~~",  # nor does a fence of the other character
        "    /gitops apply",  # indented code
        "\t/gitops apply",
        "`/gitops apply`",
        "please run `/gitops apply`",
        "<!--\n/gitops apply\n-->",
        "<!-- /gitops apply -->",
        "text <!-- starts here\n/gitops apply\n-->",
        "- /gitops apply",
        "**/gitops apply**",
        "/gitopsy apply",
        "/gitops-apply",
        "/GITOPS apply",
        "@someone-else apply",
        "@gitops-bots apply",
        "@gitops-bot's apply",
        "@gitops-bot, apply",
        "@gitops-bot thanks for the help",
        "hey @gitops-bot apply",
        "",
    ],
)
def test_quotes_code_and_prose_never_form_a_command(text: str) -> None:
    """Quoted, fenced, indented, inline-code, commented and mid-line text holds no command."""
    assert parse(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "\u200b/gitops apply",  # zero-width space before the slash
        "/git\u200bops apply",
        "/gitops apply\u200b",
        "/gitops \u200bapply",
        "/gitops\u00a0apply",  # no-break space
        "\u00a0/gitops apply",
        "/gitops apply\u00a0",
        "\uff0fgitops apply",  # fullwidth solidus
        "\u2215gitops apply",  # division slash
        "\u2044gitops apply",  # fraction slash
        "\u200f/gitops apply",  # right-to-left mark
        "/gitops \u202eylppa",  # right-to-left override
        "/gitops apply\u200e",  # left-to-right mark
        "/g\u0456tops apply",  # Cyrillic i
        "/gitops appl\u0443",  # Cyrillic u
        "/gitops apply\u0301",  # a combining accent
        "\ufeff/gitops apply",  # byte order mark
        "hello\u2028/gitops apply",  # a Unicode line separator is not a line break
        "hello\u0085/gitops apply",  # nor is NEL
        "@gitops-bot apply \u200b",
        "@gitops\u2010bot apply",  # a Unicode hyphen in the mention
    ],
)
def test_odd_unicode_never_forms_a_command(text: str) -> None:
    """Zero-width characters, lookalike slashes, direction marks and NBSP make no command."""
    assert parse(text) is None


def test_a_malformed_first_command_line_ends_the_search() -> None:
    """A command line spoilt by odd unicode is no command, and the lines after it are not read."""
    assert parse("/gitops status\u200b\n/gitops cancel") is None


def test_only_the_first_command_of_a_note_counts() -> None:
    """Of several command lines, only the first one is the note's command."""
    assert verb_of("/gitops status\n/gitops cancel\n@gitops-bot revert") is Verb.STATUS
    assert verb_of("> /gitops cancel\n\n@gitops-bot retry\n/gitops apply") is Verb.RETRY


def test_a_thousand_commands_yield_exactly_one_quickly() -> None:
    """A note of 1,000 command lines (and a 1,000-line fence) yields its first command, fast."""
    note = "\n".join(f"/gitops {v}" for v in [Verb.STATUS, *([Verb.CANCEL] * 999)])
    started = time.perf_counter()
    assert verb_of(note) is Verb.STATUS
    fenced = "```\n" + "/gitops cancel\n" * 1000 + "```\n/gitops retry"
    assert verb_of(fenced) is Verb.RETRY
    assert time.perf_counter() - started < 0.5


# -- unknown verbs and arguments ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("/gitops deploy", "unknown command 'deploy'"),
        ("/gitops APPLY", "unknown command 'APPLY'"),  # verbs are lowercase only
        ("/gitops Apply", "unknown command 'Apply'"),
        ("/gitops help deploy", "unknown command 'deploy'"),
        ("/gitops " + "x" * 100, "unknown command '" + "x" * 32 + "'"),
    ],
)
def test_unknown_verbs_get_the_help_naming_them(text: str, problem: str) -> None:
    """An unknown (or capitalised) verb is answered with the help, naming the word (cut short)."""
    found = parse(text)
    assert found is not None
    assert (found.verb, found.problem) == (Verb.HELP, problem)


def test_a_bare_prefix_asks_for_help() -> None:
    """`/gitops` alone is a request for help."""
    assert parse("/gitops") == Command(Verb.HELP, (), "/gitops", None, "slash")


@pytest.mark.parametrize(
    "text",
    [
        "/gitops retry $(id)",
        "/gitops apply <script>",
        "/gitops help a;b",
        "/gitops help " + "a" * 65,
        "/gitops help a b c d e",
        "/gitops retry `x`",
    ],
)
def test_arguments_outside_the_allowed_characters_are_refused(text: str) -> None:
    """Arguments with characters outside [A-Za-z0-9._:/-], too long or too many, are refused."""
    found = parse(text)
    assert found is not None
    assert found.problem is not None
    assert found.args == () or len(found.args) <= 1


@pytest.mark.parametrize("text", ["/gitops apply now", "/gitops cancel please", "/gitops retry 3"])
def test_verbs_without_arguments_refuse_them(text: str) -> None:
    """Only help takes an argument; any other verb with one is refused, not run."""
    found = parse(text)
    assert found is not None
    assert found.problem is not None
    assert "takes no arguments" in found.problem


def test_help_takes_a_verb() -> None:
    """`/gitops help apply` is help about a verb."""
    assert parse("/gitops help apply") == Command(
        Verb.HELP, ("apply",), "/gitops help apply", None, "slash"
    )


def test_the_mention_form_needs_the_bot_username() -> None:
    """Without a known bot username only the slash form counts."""
    assert parse_command("@gitops-bot apply", None) is None
    assert parse_command("/gitops apply", None) is not None


def test_the_kept_line_is_cut_short() -> None:
    """The command line kept for the audit log is at most MAX_LINE characters."""
    found = parse("/gitops retry " + "a" * 500)
    assert found is not None
    assert len(found.line) == MAX_LINE


@given(st.text(max_size=300))
def test_any_text_quoted_holds_no_command(text: str) -> None:
    """Whatever a note says, quoting each of its lines leaves no command in it."""
    quoted = "\n".join("> " + line for line in text.split("\n"))
    assert parse(quoted) is None


@given(st.text(max_size=300))
def test_a_found_command_line_is_plain_ascii(text: str) -> None:
    """Whatever the text, a command found starts with a prefix and is printable ASCII."""
    found = parse(text)
    if found is not None:
        assert found.line.startswith(("/gitops", "@"))
        assert all(" " <= ch <= "~" or ch == "\t" for ch in found.line)


# -- who may run what ----------------------------------------------------------------------------

NON_MEMBER, GUEST, REPORTER, DEVELOPER, MAINTAINER, OWNER = 0, 10, 20, 30, 40, 50

#: Default rules: (verb, is_author, access level) -> allowed
CASES = [
    (Verb.APPLY, False, DEVELOPER, True),
    (Verb.APPLY, False, REPORTER, False),
    (Verb.APPLY, True, REPORTER, False),  # the author privilege starts at Developer
    (Verb.APPLY, True, GUEST, False),
    (Verb.STATUS, False, DEVELOPER, True),
    (Verb.STATUS, False, GUEST, False),
    (Verb.STATUS, True, GUEST, False),
    (Verb.RETRY, False, DEVELOPER, False),
    (Verb.RETRY, False, MAINTAINER, True),
    (Verb.RETRY, True, DEVELOPER, True),
    (Verb.RETRY, True, REPORTER, False),
    (Verb.CANCEL, False, DEVELOPER, False),
    (Verb.CANCEL, False, OWNER, True),
    (Verb.CANCEL, True, REPORTER, False),
    (Verb.CANCEL, True, DEVELOPER, True),
    (Verb.CANCEL, True, GUEST, False),
    (Verb.REVERT, False, MAINTAINER, True),
    (Verb.REVERT, True, DEVELOPER, False),
    (Verb.REVERT, False, DEVELOPER, False),
    (Verb.HELP, False, NON_MEMBER, True),
    (Verb.APPLY, True, NON_MEMBER, False),  # an author who left the project is not one
    (Verb.RETRY, False, NON_MEMBER, False),
]


@pytest.mark.parametrize(("verb", "is_author", "level", "expected"), CASES)
def test_default_rules(verb: Verb, is_author: bool, level: int, expected: bool) -> None:
    """apply/status: Developer+; retry/cancel: Maintainer+, or the MR author from Developer up
    (a Guest or Reporter author gains nothing); revert: Maintainer+; help: anyone."""
    decision = allowed(verb, is_author=is_author, access_level=level)
    assert decision.allowed is expected
    if not expected:
        assert verb.value in decision.reason


@pytest.mark.parametrize("verb", [v for v in Verb if v is not Verb.HELP])
@pytest.mark.parametrize("is_author", [True, False])
def test_a_failed_lookup_denies(verb: Verb, is_author: bool) -> None:
    """When the access level could not be read, nothing that needs one is allowed."""
    decision = allowed(verb, is_author=is_author, access_level=None)
    assert not decision.allowed
    assert "could not be checked" in decision.reason


def test_help_needs_no_lookup() -> None:
    """Help is for anyone: no lookup is needed, and a failed one does not matter."""
    assert not Rules().needs_lookup(Verb.HELP)
    assert allowed(Verb.HELP, is_author=False, access_level=None).allowed


def test_rules_from_flag_values() -> None:
    """Flag values override per verb; verbs left out keep their default; junk is dropped."""
    rules = rules_from(
        {"retry": DEVELOPER, "status": MAINTAINER, "nope": 1, "help": "x"}, ["status", "nope"]
    )
    assert allowed(Verb.RETRY, is_author=False, access_level=DEVELOPER, rules=rules).allowed
    assert not allowed(Verb.CANCEL, is_author=True, access_level=DEVELOPER, rules=rules).allowed
    assert allowed(Verb.STATUS, is_author=True, access_level=DEVELOPER, rules=rules).allowed
    assert not allowed(Verb.STATUS, is_author=False, access_level=DEVELOPER, rules=rules).allowed
    assert not allowed(Verb.STATUS, is_author=True, access_level=GUEST, rules=rules).allowed
    assert not allowed(Verb.REVERT, is_author=False, access_level=DEVELOPER, rules=rules).allowed
    assert rules.who(Verb.RETRY) == "Developer or higher"
    assert rules.who(Verb.HELP) == "anyone"


def test_the_refusal_says_what_is_needed_and_what_the_person_has() -> None:
    """A refusal names the level needed, the author exception (from Developer), and the
    person's level; where the author privilege adds nothing it is not mentioned."""
    decision = allowed(Verb.RETRY, is_author=True, access_level=REPORTER)
    assert decision.reason == (
        "retry needs Maintainer or higher (Developer or higher for the MR author); "
        "you have Reporter"
    )
    assert allowed(Verb.APPLY, is_author=True, access_level=GUEST).reason == (
        "apply needs Developer or higher; you have Guest"
    )
