"""User text in the bot's Markdown (status comment, replies, MR description) made inert.

Every value a template prints is escaped for Markdown and HTML unless it is `Markup` built from
known-safe parts, so text a requester typed (title, names, error details, paths, reasons) can
never add markup, ping anyone, reference an issue, hide a bidi character, or put a `/gitops`
command or a GitLab quick action at the start of a line of the bot's own note. The rules are
bot/core/inert.py's; this module adds Markdown's and HTML's specials. The Markdown templates'
environment (bot/render/templates.py) prints every value through `inert` and has the filters
`inert` and `code`.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from markupsafe import Markup

from bot.core.inert import defuse_mentions, single_line

#: Longest user-provided text shown (title, names); the rest is cut with an ellipsis.
TEXT_LIMIT = 300

#: What may go into a code span untouched (ids, enum names, SHAs).
_PLAIN = re.compile(r"[A-Za-z0-9._:()\- ]+")
# GitLab turns these into references when a word follows; a reference to a user notifies them
# (`@name`, `@all`), one to an issue or MR adds a "mentioned in" note there. The fullwidth
# look-alike of the sigil reads the same and references nothing. (GitLab matches references in
# the rendered text, so an HTML entity would not help; a zero-width character would hide.)
_REFERENCE = re.compile(r"([#!~%$&])(?=[\w\"'])")
_LOOKALIKE = {sigil: chr(ord(sigil) + 0xFEE0) for sigil in "#!~%$&"}
# Markdown and HTML specials, as entities (raw < > & ` |) or backslash escapes (emphasis, links).
_SPECIALS = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "`": "&#96;",
    "|": "&#124;",
    "\\": "\\\\",
    "*": "\\*",
    "_": "\\_",
    "[": "\\[",
    "]": "\\]",
    "~": "\\~",
}
_SPECIAL = re.compile("|".join(re.escape(char) for char in _SPECIALS))


def md_escape(value: object, limit: int = TEXT_LIMIT) -> Markup:
    """User text made inert in a Markdown comment: one line, no markup, no mentions, no commands.

    Line breaks become spaces (so the text never starts a line of the note, where GitLab runs
    quick actions and the bot reads `/gitops` commands), hidden characters show as `[U+202E]`,
    `@` and the other reference sigils become look-alikes; a leading `/` is an entity besides.
    """
    text = defuse_mentions(single_line(str(value), limit))
    text = _REFERENCE.sub(lambda m: _LOOKALIKE[m.group(1)], text)
    text = _SPECIAL.sub(lambda m: _SPECIALS[m.group(0)], text)
    if text.startswith("/"):
        text = "&#47;" + text[1:]
    return Markup(text)


def inert(value: object) -> Markup:
    """The Markdown templates' `inert` filter and `finalize`: user text escaped; Markup built from
    safe parts kept (so every printed value that is not Markup is treated as user text)."""
    return value if isinstance(value, Markup) else md_escape(value)


def code(value: object) -> Markup:
    """A code span for known-plain text (ids, names, codes); anything else is escaped text."""
    text = str(value)
    if _PLAIN.fullmatch(text):
        return Markup(f"`{text}`")
    return md_escape(text)


def link(text: str, url: str | None) -> Markup | None:
    """A Markdown link to an http(s) URL (characters that could end it, and `@`, encoded)."""
    if not url or not url.startswith(("https://", "http://")):
        return None
    safe_url = quote(url, safe=":/?#!$&*+,;=%-._~")
    return Markup(f"[{md_escape(text)}]({safe_url})")
