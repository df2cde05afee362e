"""The patterns of a repository's JSON Schemas (`pattern`, `patternProperties`, `format: regex`)
on RE2 (`google-re2`), a regex engine whose time is linear in the text it reads.

Python's `re` backtracks: `^(a+)+$` on forty characters runs for hours, and nothing can stop it
from the outside on a thread. RE2 runs it in microseconds, but cannot run what needs
backtracking: lookaround and backreferences. A pattern using them is refused (`PatternRefused`
naming it and saying why), so the check fails closed, never passes unmatched.

JSON Schema patterns are ECMA-262 regular expressions, matched with search semantics (anywhere
in the text unless anchored). `translate` rewrites one into RE2's syntax where the two differ in
ways that matter: `.` stops at every ECMA line terminator (\\n, \\r, U+2028, U+2029), `\\s` and
`\\S` are ECMA's white space (RE2's are ASCII only), `\\uXXXX` and `\\u{...}` are code points,
`(?<name>` a named group, `[^]` any character and `[]` none, `\\b` in a class the backspace, and
a `{` or `]` that starts no quantifier or class is a literal (Annex B). `^`, `$`, `\\d`, `\\w`
and `\\b` already mean what ECMA says (RE2's `$` is the end of the text, not before a final
newline as in Python's `re`).

RE2's time is linear in the text and in the size of the compiled pattern together: the worst
patterns measured cost some 2 ns per character and instruction. A match is attempted only when
their product stays within MAX_MATCH_COST (about 0.4 s at worst); a longer text is a problem
naming its length, never a pass. A check compiles each pattern once (`Patterns`, a small LRU:
each compiled pattern may hold up to RE2's default 8 MiB of matching state).
"""

from __future__ import annotations

import unicodedata
from collections import OrderedDict
from typing import Any

import re2

from bot.core.inert import single_line

#: The most work one match may cost: the text's length (UTF-8 bytes) times the compiled
#: pattern's size (RE2 instructions).
MAX_MATCH_COST = 200_000_000
#: The most compiled patterns one check keeps.
MAX_CACHED = 64
#: How much of a pattern a problem quotes.
SHOWN_PATTERN = 80

LINEAR_ONLY = "it uses lookaround or a backreference, which a linear-time engine cannot run"

# ECMA-262 WhiteSpace and LineTerminator, and their complement, as class ranges for RE2
_SPACE = r"\x{9}-\x{D}\x{20}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}"
_SPACE += r"\x{3000}\x{FEFF}"
_NOT_SPACE = (
    r"\x{0}-\x{8}\x{E}-\x{1F}\x{21}-\x{9F}\x{A1}-\x{167F}\x{1681}-\x{1FFF}\x{200B}-\x{2027}"
    r"\x{202A}-\x{202E}\x{2030}-\x{205E}\x{2060}-\x{2FFF}\x{3001}-\x{FEFE}\x{FF00}-\x{10FFFF}"
)
_DOT = r"[^\n\r\x{2028}\x{2029}]"
_ANY = r"[\x{0}-\x{10FFFF}]"
_HEX = frozenset("0123456789abcdefABCDEF")
_KEPT = frozenset("dDwWfnrtv")  # escapes RE2 reads as ECMA does
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our problem to report, not RE2's to print


class PatternRefused(ValueError):
    """A pattern the checks cannot run; the message names it and says why."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"the pattern {shown(pattern)} cannot be used: {reason}")
        self.pattern = pattern
        self.reason = reason


def shown(text: str, limit: int = SHOWN_PATTERN) -> str:
    """Repository text quoted in a problem: one line, hidden characters shown, cut short."""
    return "'" + single_line(text, limit).replace("'", "\\'") + "'"


class Pattern:
    """A compiled pattern: `search` says whether it matches anywhere in a text."""

    __slots__ = ("_regex", "size", "source")

    def __init__(self, source: str, regex: Any) -> None:
        self.source = source
        self._regex = regex
        self.size = max(int(regex.programsize), 1)

    def too_long(self, text: str) -> str | None:
        """Why `text` is too long for this pattern to be matched against, or None."""
        longest = MAX_MATCH_COST // self.size
        if len(text) > longest // 4 and len(text.encode("utf-8", "surrogatepass")) > longest:
            return (
                f"{len(text)} characters, more than the {longest} the pattern "
                f"{shown(self.source, 40)} is matched against"
            )
        return None

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in `text` (ECMA-262 search semantics). The
        caller checks `too_long` first."""
        return self._regex.search(text.encode("utf-8", "surrogatepass")) is not None


def compile_pattern(pattern: str) -> Pattern:
    """The ECMA-262 `pattern` compiled for RE2, or PatternRefused saying why it cannot be."""
    translated = translate(pattern)
    try:
        regex = re2.compile(translated.encode("utf-8"), _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else b"invalid"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        reason = f"not a pattern RE2 can run ({single_line(str(detail), 80)})"
        raise PatternRefused(pattern, reason) from None
    return Pattern(pattern, regex)


class Patterns:
    """The patterns of one check, each compiled once (a refusal is remembered too)."""

    def __init__(self, size: int = MAX_CACHED) -> None:
        self._size = size
        self._compiled: OrderedDict[str, Pattern | PatternRefused] = OrderedDict()

    def get(self, pattern: str) -> Pattern:
        """`pattern` compiled, or PatternRefused."""
        found = self._compiled.get(pattern)
        if found is None:
            try:
                found = compile_pattern(pattern)
            except PatternRefused as refused:
                found = refused
            self._compiled[pattern] = found
            if len(self._compiled) > self._size:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(pattern)
        if isinstance(found, PatternRefused):
            raise found
        return found


def translate(pattern: str) -> str:
    """The ECMA-262 `pattern` in RE2's syntax (see the module's docstring), or PatternRefused
    for lookaround, backreferences and what is no pattern at all."""
    if any(unicodedata.category(ch) == "Cs" for ch in pattern):
        raise PatternRefused(pattern, "it holds a lone surrogate, which is no character")
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            text, i = _escape(pattern, i, in_class=False)
            out.append(text)
            continue
        if ch == "[":
            text, i = _class(pattern, i)
            out.append(text)
            continue
        if ch == "(":
            text, i = _group(pattern, i)
            out.append(text)
            continue
        end = _quantifier_end(pattern, i) if ch == "{" else None
        if end is not None:
            out.append(pattern[i:end])
            i = end
            continue
        if ch == ".":
            out.append(_DOT)
        elif ch in "{]}":
            out.append(_literal(ch))
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _quantifier_end(pattern: str, i: int) -> int | None:
    """Where `{n}`, `{n,}` or `{n,m}` starting at `i` ends (None: the `{` is a literal)."""
    j = i + 1
    while j < len(pattern) and pattern[j].isdigit() and pattern[j].isascii():
        j += 1
    if j == i + 1:
        return None
    if j < len(pattern) and pattern[j] == ",":
        j += 1
        while j < len(pattern) and pattern[j].isdigit() and pattern[j].isascii():
            j += 1
    return j + 1 if j < len(pattern) and pattern[j] == "}" else None


def _group(pattern: str, i: int) -> tuple[str, int]:
    """A group's opening at `i`: plain, non-capturing or named; lookaround is refused."""
    rest = pattern[i + 1 : i + 4]
    if not rest.startswith("?"):
        return "(", i + 1
    if rest.startswith("?:"):
        return "(?:", i + 3
    if rest.startswith(("?=", "?!")) or rest in ("?<=", "?<!"):
        raise PatternRefused(pattern, LINEAR_ONLY)
    if rest.startswith("?<"):
        return "(?P<", i + 3
    raise PatternRefused(pattern, "a group `(?` of a form ECMA-262 patterns do not have")


def _class(pattern: str, i: int) -> tuple[str, int]:
    """A character class starting at `i`, as RE2 reads it."""
    j = i + 1
    negated = j < len(pattern) and pattern[j] == "^"
    if negated:
        j += 1
    if j < len(pattern) and pattern[j] == "]":  # `[]` matches nothing, `[^]` anything
        return (_ANY if negated else "[^" + _ANY[1:]), j + 1
    out = ["[^" if negated else "["]
    while j < len(pattern) and pattern[j] != "]":
        ch = pattern[j]
        if ch == "\\":
            text, j = _escape(pattern, j, in_class=True)
            out.append(text)
            continue
        out.append(r"\x{5B}" if ch == "[" else ch)  # `[:alpha:]` is no POSIX class in ECMA
        j += 1
    if j >= len(pattern):
        raise PatternRefused(pattern, "not a valid pattern: a `[` is never closed")
    out.append("]")
    return "".join(out), j + 1


def _escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """The escape starting at `i` (a backslash), as RE2 reads it, and where it ends."""
    if i + 1 >= len(pattern):
        raise PatternRefused(pattern, "not a valid pattern: it ends with a backslash")
    ch = pattern[i + 1]
    end = i + 2
    if ch in _KEPT:
        return "\\" + ch, end
    if ch in "sS":
        ranges = _SPACE if ch == "s" else _NOT_SPACE
        return (ranges if in_class else f"[{ranges}]"), end
    if ch in "bB":
        return (r"\x{8}" if in_class else "\\" + ch), end
    if ch == "0" and not pattern[end : end + 1].isdigit():
        return r"\x{0}", end
    if ch.isdigit() or (ch == "k" and pattern[end : end + 1] == "<"):
        raise PatternRefused(pattern, LINEAR_ONLY)
    if ch == "c" and pattern[end : end + 1].isascii() and pattern[end : end + 1].isalpha():
        return f"\\x{{{ord(pattern[end]) % 32:X}}}", end + 1
    if ch == "x" and len(pattern) >= end + 2 and set(pattern[end : end + 2]) <= _HEX:
        return f"\\x{{{pattern[end : end + 2]}}}", end + 2
    if ch == "u":
        return _code_point(pattern, end)
    if ch in "pP" and pattern[end : end + 1] == "{":
        close = pattern.find("}", end)
        if close < 0:
            raise PatternRefused(pattern, "not a valid pattern: a `\\p{` is never closed")
        return pattern[i : close + 1], close + 1
    return _literal(ch), end  # an identity escape: `\/`, `\-`, `\.`


def _code_point(pattern: str, at: int) -> tuple[str, int]:
    """`\\u{X...}`, `\\uXXXX` or a surrogate pair of them, from just after the `u`."""
    if pattern[at : at + 1] == "{":
        close = pattern.find("}", at)
        digits = pattern[at + 1 : close] if close > 0 else ""
        if not digits or not set(digits) <= _HEX or int(digits, 16) > 0x10FFFF:
            raise PatternRefused(pattern, "not a valid pattern: a bad `\\u{...}` escape")
        return f"\\x{{{digits}}}", close + 1
    digits = pattern[at : at + 4]
    if len(digits) < 4 or not set(digits) <= _HEX:
        return "u", at  # Annex B: `\u` without four hex digits is the letter
    value = int(digits, 16)
    low = pattern[at + 6 : at + 10] if pattern[at + 4 : at + 6] == "\\u" else ""
    if 0xD800 <= value <= 0xDBFF and len(low) == 4 and set(low) <= _HEX:
        second = int(low, 16)
        if 0xDC00 <= second <= 0xDFFF:
            joined = 0x10000 + ((value - 0xD800) << 10) + (second - 0xDC00)
            return f"\\x{{{joined:X}}}", at + 10
    if 0xD800 <= value <= 0xDFFF:
        raise PatternRefused(pattern, "it names a lone surrogate, which is no character")
    return f"\\x{{{value:X}}}", at + 4


def _literal(ch: str) -> str:
    """`ch` matched as itself, whatever RE2 makes of it unescaped."""
    return ch if ch.isalnum() else f"\\x{{{ord(ch):X}}}"
