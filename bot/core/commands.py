"""MR comment commands: the grammar (`/gitops <verb>`, `@<bot> <verb>`) and who may run what.

Pure: no IO. The grammar is strict on purpose, because a comment is untrusted text typed by
anyone who can comment on the MR:

- A command is a line that starts (after at most three spaces) with `/gitops <verb>` or
  `@<bot-username> <verb>`. Lines in block quotes (`>` and their lazy continuation lines, GitLab's
  `>>>` blocks), fenced or indented code blocks and HTML comments never count; inline code cannot
  start a line, so it never counts either.
- Only the first command line of a note counts; every later one is ignored.
- Verbs are lowercase ASCII words from `Verb`. `/gitops <unknown>` is answered with the help
  (naming the unknown word); `@<bot> <unknown>` is taken as prose addressed to the bot and ignored.
- Arguments are short tokens from `[A-Za-z0-9._:/-]`; anything else refuses the command.
- Lines are split on `\\n` only (a `\\r` before it is dropped): U+2028 and friends never start a
  line. A command line with any character outside printable ASCII (zero-width characters, RTL
  marks, NBSP, homoglyphs) is not a command at all, and no later line is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class Verb(StrEnum):
    """What a comment can ask the bot to do."""

    APPLY = "apply"
    STATUS = "status"
    RETRY = "retry"
    CANCEL = "cancel"
    REVERT = "revert"
    HELP = "help"


#: What each verb does, for the help reply.
DESCRIPTIONS: dict[Verb, str] = {
    Verb.APPLY: "register this merge request as a change request and ask for approval",
    Verb.STATUS: "refresh the status comment",
    Verb.RETRY: "re-run the step where the request stopped",
    Verb.CANCEL: "withdraw the approval request and close the request",
    Verb.REVERT: "undo a merged change with a new change request",
    Verb.HELP: "show this help",
}

#: The slash form's prefix.
SLASH = "/gitops"
#: The longest command line kept (for the audit log and replies).
MAX_LINE = 200
#: At most this many arguments, each at most MAX_ARG characters.
MAX_ARGS = 4
MAX_ARG = 64
#: How many characters of an unknown verb a reply may repeat.
MAX_SHOWN = 32
_ARG = re.compile(rf"[A-Za-z0-9._:/-]{{1,{MAX_ARG}}}")
_BLANKS = re.compile(r"[ \t]+")
_MENTION = re.compile(r"@([A-Za-z0-9_][A-Za-z0-9_.-]*)")
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)$")
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e\t]*")
#: Verbs that take an argument: `help <verb>`. Every other verb takes none.
_ARGS_ALLOWED: dict[Verb, int] = {Verb.HELP: 1}
_VERBS = frozenset(v.value for v in Verb)


@dataclass(frozen=True, slots=True)
class Command:
    """The one command of a note, or the reason it cannot run (`problem`, answered with help)."""

    verb: Verb
    args: tuple[str, ...]
    #: the command line as typed (leading spaces removed, cut at MAX_LINE)
    line: str
    #: why the line cannot run as typed (unknown verb, bad arguments); None when it can
    problem: str | None = None
    via: Literal["slash", "mention"] = "slash"


def parse_command(text: str, bot_username: str | None) -> Command | None:
    """The first command in a comment's text, or None when it holds none."""
    for line in _visible_lines(text):
        found = _parse_line(line, bot_username)
        if found is _NOT_COMMAND:
            continue
        return found if isinstance(found, Command) else None
    return None


class _Skip:
    """Marker: this line is not a command line (keep looking)."""


_NOT_COMMAND = _Skip()


def _parse_line(line: str, bot_username: str | None) -> Command | _Skip | None:
    """A command, _NOT_COMMAND (not a command line: keep looking), or None (stop: malformed)."""
    via: Literal["slash", "mention"]
    if line.startswith(SLASH):
        rest, via = line[len(SLASH) :], "slash"
    elif bot_username and line.startswith("@"):
        mention = _MENTION.match(line)
        if mention is None or mention.group(1).lower() != bot_username.lower():
            return _NOT_COMMAND
        rest, via = line[mention.end() :], "mention"
    else:
        return _NOT_COMMAND
    if rest and rest[0] not in " \t":
        return _NOT_COMMAND  # "/gitopsy", "@gitops-bot's", "/gitops\u00a0apply"
    words = _BLANKS.split(rest.strip(" \t")) if rest.strip(" \t") else []
    if via == "mention" and (not words or words[0] not in _VERBS):
        return _NOT_COMMAND  # prose addressed to the bot, not a command
    if not _PRINTABLE_ASCII.fullmatch(line):
        return None  # odd unicode on the command line: never a command
    shown = line[:MAX_LINE]
    if not words:
        return Command(Verb.HELP, (), shown, None, via)
    head, args = words[0], tuple(words[1:])
    if head not in _VERBS:
        return Command(Verb.HELP, (), shown, f"unknown command {head[:MAX_SHOWN]!r}", via)
    verb = Verb(head)
    if len(args) > MAX_ARGS or not all(_ARG.fullmatch(a) for a in args):
        problem = (
            f"arguments may only use letters, digits and . _ : / - "
            f"(at most {MAX_ARGS}, each up to {MAX_ARG} characters)"
        )
        return Command(verb, (), shown, problem, via)
    if len(args) > _ARGS_ALLOWED.get(verb, 0):
        return Command(verb, args, shown, f"{verb.value} takes no arguments", via)
    if verb is Verb.HELP and args and args[0] not in _VERBS:
        return Command(verb, args, shown, f"unknown command {args[0][:MAX_SHOWN]!r}", via)
    return Command(verb, args, shown, None, via)


def _visible_lines(text: str) -> Iterator[str]:
    """The lines of a comment that are ordinary text, leading spaces (at most 3) removed."""
    fence: str | None = None  # the opening fence of the code block we are in
    gitlab_quote = False  # inside GitLab's `>>>` multi-line block quote
    html_comment = False
    quote_paragraph = False  # a `>` quote's paragraph goes on until a blank line
    for raw in text.split("\n"):
        line = raw.removesuffix("\r")
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if fence is not None:
            if indent <= 3 and _closes(fence, stripped):
                fence = None
            continue
        if html_comment:
            html_comment = "-->" not in line
            continue
        if gitlab_quote:
            gitlab_quote = stripped.rstrip() != ">>>"
            continue
        if not stripped.strip():
            quote_paragraph = False
            continue
        if indent >= 4:
            continue  # indented code (or a continuation too deep to be a command)
        opening = _FENCE.match(stripped)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            quote_paragraph = False
            continue
        if stripped.rstrip() == ">>>":
            gitlab_quote = True
            continue
        if stripped.startswith(">"):
            quote_paragraph = True
            continue
        if quote_paragraph:
            continue  # a lazy continuation line belongs to the quote above it
        start = line.rfind("<!--")
        if start != -1 and "-->" not in line[start + 4 :]:
            html_comment = True
        if stripped.startswith("<!--"):
            continue
        yield stripped


def _closes(fence: str, stripped: str) -> bool:
    """Whether a line closes the fenced block opened by `fence` (same character, as long)."""
    body = stripped.rstrip()
    return len(body) >= len(fence) and set(body) == {fence[0]}


# -- who may run what ------------------------------------------------------------------------

#: GitLab's access levels (members API), with the names GitLab shows.
ACCESS_NAMES: dict[int, str] = {
    0: "no access",
    5: "Minimal access",
    10: "Guest",
    15: "Planner",
    20: "Reporter",
    30: "Developer",
    40: "Maintainer",
    50: "Owner",
    60: "Admin",
}
GUEST, DEVELOPER, MAINTAINER = 10, 30, 40

#: Default minimum access level per verb (0: anyone, no membership lookup needed).
DEFAULT_MIN_ACCESS: dict[Verb, int] = {
    Verb.APPLY: DEVELOPER,
    Verb.STATUS: DEVELOPER,
    Verb.RETRY: MAINTAINER,
    Verb.CANCEL: MAINTAINER,
    Verb.REVERT: MAINTAINER,
    Verb.HELP: 0,
}
#: Verbs the MR's author may run with less than the verb's level (but never below
#: AUTHOR_MIN_ACCESS).
DEFAULT_AUTHOR_MAY: frozenset[Verb] = frozenset({Verb.APPLY, Verb.STATUS, Verb.RETRY, Verb.CANCEL})
#: Being the MR's author lets a member skip nothing below Developer: a Guest or Reporter who
#: wrote the MR (or was demoted since) has only their own level's rights.
AUTHOR_MIN_ACCESS = DEVELOPER


def access_name(level: int) -> str:
    """GitLab's name for an access level ("Developer"), or the number."""
    return ACCESS_NAMES.get(level, f"access level {level}")


@dataclass(frozen=True, slots=True)
class Rules:
    """Who may run each verb: a minimum access level, or being the MR's author."""

    min_access: Mapping[Verb, int] = field(default_factory=lambda: dict(DEFAULT_MIN_ACCESS))
    author_may: frozenset[Verb] = DEFAULT_AUTHOR_MAY

    def needs_lookup(self, verb: Verb) -> bool:
        """Whether deciding `verb` needs the commenter's access level (not for "anyone")."""
        return self.min_access.get(verb, MAINTAINER) > 0

    def who(self, verb: Verb) -> str:
        """Who may run `verb`, in words (for the help reply)."""
        need = self.min_access.get(verb, MAINTAINER)
        if need <= 0:
            return "anyone"
        text = f"{access_name(need)} or higher"
        if verb in self.author_may and need > AUTHOR_MIN_ACCESS:
            text += f" ({access_name(AUTHOR_MIN_ACCESS)} or higher for the MR author)"
        return text


DEFAULT_RULES = Rules()


def rules_from(min_access: Mapping[str, object], author_may: Iterable[str]) -> Rules:
    """Rules from flag values (unknown verbs are dropped; missing verbs keep their default)."""
    levels = dict(DEFAULT_MIN_ACCESS)
    for name, level in min_access.items():
        if name in _VERBS and isinstance(level, int):
            levels[Verb(name)] = level
    authors = frozenset(Verb(v) for v in author_may if v in _VERBS)
    return Rules(levels, authors)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether the commenter may run the verb, and why (the reason is shown when refused)."""

    allowed: bool
    reason: str


def allowed(
    verb: Verb, *, is_author: bool, access_level: int | None, rules: Rules = DEFAULT_RULES
) -> Decision:
    """Decides whether a commenter may run `verb`; `access_level` None means the lookup failed.

    A failed lookup denies everything that needs one (fail closed); 0 means "not a member".
    The author privilege counts only from AUTHOR_MIN_ACCESS (Developer) up.
    """
    need = rules.min_access.get(verb, MAINTAINER)
    if need <= 0:
        return Decision(True, "anyone may")
    if access_level is None:
        return Decision(False, "your access to this project could not be checked; try again later")
    if access_level >= need:
        return Decision(True, f"{access_name(access_level)} may")
    if is_author and verb in rules.author_may and access_level >= AUTHOR_MIN_ACCESS:
        return Decision(True, "the MR author may")
    return Decision(
        False, f"{verb.value} needs {rules.who(verb)}; you have {access_name(access_level)}"
    )
