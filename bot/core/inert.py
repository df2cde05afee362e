"""Text the bot writes to GitLab, made inert: it runs nothing, pings nobody, hides nothing.

GitLab acts on text the author account writes with that account's rights: a line whose first
character is `/` in an MR description or a note is a quick action (`/merge`, `/target_branch`,
`/assign_reviewer`), `@name` and `@all` notify people (GitLab cannot tell a group from a user
without a lookup, so no requester text gets a live mention at all), and bidi or zero-width
characters make a text read differently from what it is. Every title, description, commit
message, branch name and note the bot writes is built with the functions here and checked with
`ensure_inert` at the seam where it is sent:

- no line whose first non-space character is `/`;
- no `@` that could start a mention outside code (in plain text U+FF20, the fullwidth `@`,
  stands in for it);
- no control character but the newline, no format character (Unicode category Cf, which holds
  the bidi controls and the zero-width ones) and no line or paragraph separator: each is shown
  as `[U+XXXX]`, and every line break GitLab might honour becomes a newline first.

A requester's multi-line text goes into `quote_block`: a blockquote (every line starts with `> `)
holding a fenced code block whose fence is longer than any backtick run in the text, so nothing
in it is Markdown, a mention, a reference or a quick action, and it still reads as written.
"""

from __future__ import annotations

import html
import re
import unicodedata

#: Every line break GitLab (Ruby, Markdown, browsers) might honour; `\r\n` first.
LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: Unicode categories never written as themselves: controls, formats (bidi, zero-width),
#: surrogates, line and paragraph separators. The newline is the one exception.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: Stands in for `@` in plain text: FULLWIDTH COMMERCIAL AT reads as one and mentions nobody.
LOOKALIKE_AT = "\uff20"
#: Stands in for a single line's leading `/`: FULLWIDTH SOLIDUS.
LOOKALIKE_SLASH = "\uff0f"
#: Spaces a tab becomes in a quoted block (a tab is a control character).
TAB_SIZE = 4
#: A GitLab MR title's length limit, which a commit subject shares here.
TITLE_LIMIT = 255
#: The title when a requester's is blank.
DEFAULT_TITLE = "GitOps change"

_SPACES = re.compile(r"\s+")
#: An `@` that could start a mention (`@all`, `@user`, `@group/sub`, `@_x`, `@.x`).
_MENTION = re.compile(r"@(?=[\w.])")
_BACKTICKS = re.compile(r"`+")
_QUOTE_MARKERS = re.compile(r"^((?: {0,3}>[ ]?)*)(.*)$", re.DOTALL)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


class NotInert(ValueError):
    """Text about to be written to GitLab would run, ping or hide something."""


def is_hidden(ch: str) -> bool:
    """A character that must not be written as itself (the newline is not one)."""
    return ch != "\n" and unicodedata.category(ch) in HIDDEN_CATEGORIES


def visible(ch: str) -> str:
    """How a hidden character is shown instead: `[U+202E]`."""
    return f"[U+{ord(ch):04X}]"


def normalise_breaks(text: str) -> str:
    """Every line break GitLab might honour (CR LF, CR, VT, FF, NEL, U+2028, U+2029) as LF."""
    return LINE_BREAKS.sub("\n", text)


def hidden_in(text: str) -> list[str]:
    """The distinct hidden characters of `text`, in code point order."""
    return sorted(ch for ch in set(text) if is_hidden(ch))


def show_hidden(text: str) -> str:
    """Every hidden character (controls but LF, formats, separators) shown as `[U+XXXX]`."""
    hidden = hidden_in(text)
    return text.translate({ord(ch): visible(ch) for ch in hidden}) if hidden else text


def defuse_mentions(text: str) -> str:
    """Every `@` in plain text as its fullwidth look-alike: no mention, group mention or `@all`."""
    return text.replace("@", LOOKALIKE_AT)


def single_line(text: str, limit: int | None = None) -> str:
    """One line: breaks and runs of spaces become one space, hidden characters shown, trimmed,
    cut to `limit` characters with an ellipsis."""
    flat = normalise_breaks(text).replace("\n", " ").replace("\t", " ")
    flat = _SPACES.sub(" ", show_hidden(flat)).strip()
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat


def inert_line(text: str, limit: int | None = None) -> str:
    """A single line of plain text that is inert: no break, nothing hidden, no mention, and a
    leading `/` shown as its fullwidth look-alike."""
    line = defuse_mentions(single_line(text, limit))
    if line.startswith("/"):
        line = LOOKALIKE_SLASH + line[1:]
    return line


def inert_title(text: str) -> str:
    """An MR title or commit subject: an inert line within GitLab's 255 characters."""
    return inert_line(text, TITLE_LIMIT) or DEFAULT_TITLE


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in `text` (at least three)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def quote_block(text: str, info: str = "text") -> str:
    """A requester's text as a quoted code block; "" when there is nothing to show (`info`: the
    fence's language, `diff` for a change's preview).

    Every line starts with `> ` (GitLab runs a quick action only from a line starting with `/`),
    and the fenced block inside makes mentions, references, HTML and Markdown plain text.
    """
    body = show_hidden(normalise_breaks(text).expandtabs(TAB_SIZE)).strip("\n")
    if not body.strip():
        return ""
    fence = fence_for(body)
    lines = [f"{fence}{info}", *body.split("\n"), fence]
    return "\n".join(f"> {line}" for line in lines)


# -- the check at the write seams ----------------------------------------------------------------


def outside_code(markdown: str) -> str:
    """The Markdown's text outside fenced code blocks and code spans (blockquotes looked into).

    Conservative: a fence ends where its blockquote ends; a code span lies within one line.
    """
    kept: list[str] = []
    fence: tuple[str, int, int] | None = None  # (fence character, length, quote depth)
    for line in markdown.split("\n"):
        found = _QUOTE_MARKERS.match(line)
        markers, rest = (found.group(1), found.group(2)) if found else ("", line)
        depth = markers.count(">")
        if fence is not None:
            if depth >= fence[2]:
                closing = _FENCE.match(rest)
                if (
                    closing is not None
                    and not closing.group(2).strip()
                    and closing.group(1)[0] == fence[0]
                    and len(closing.group(1)) >= fence[1]
                ):
                    fence = None
                continue
            fence = None
        opening = _FENCE.match(rest)
        if opening is not None and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = (opening.group(1)[0], len(opening.group(1)), depth)
            continue
        kept.append(_CODE_SPAN.sub(" ", rest))
    return "\n".join(kept)


def problems(text: str, *, markdown: bool = True) -> list[str]:
    """What would make `text` live in GitLab, in words; empty when it is inert.

    `markdown`: the text is rendered as Markdown (descriptions, notes), so code is exempt from
    the mention check and entities count as what they render; else it is plain (titles, commit
    messages, branch names) and every `@` before a name counts.
    """
    found: list[str] = []
    hidden = hidden_in(text)
    if hidden:
        names = ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, '')}".strip() for ch in hidden)
        found.append(f"hidden or control characters: {names}")
    for number, line in enumerate(text.split("\n"), start=1):
        if line.lstrip().startswith("/"):
            found.append(f"line {number} starts with '/' (a quick action): {line.strip()[:40]!r}")
            break
    live = html.unescape(outside_code(text)) if markdown else text
    mention = _MENTION.search(live)
    if mention is not None:
        at = mention.start()
        found.append(f"a live mention: {live[at : at + 24].split()[0]!r}")
    return found


def ensure_inert(text: str, *, markdown: bool = True) -> None:
    """Raises NotInert (a ValueError) naming what would make `text` live in GitLab."""
    found = problems(text, markdown=markdown)
    if found:
        raise NotInert("text for GitLab is not inert: " + "; ".join(found))
