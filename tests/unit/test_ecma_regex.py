"""JSON Schema patterns on RE2 (bot/app/checks/ecma_regex.py): ECMA-262 meaning where RE2's
syntax differs, search semantics, and a clear refusal of what a linear-time engine cannot run;
`format` enforced with RE2 for `regex`."""

from __future__ import annotations

import json

import pytest

from bot.app.checks import ChangedFile, ValidatorRule, check_files
from bot.app.checks.ecma_regex import PatternRefused, Patterns, compile_pattern


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^[a-z]+$", "abc", True),
        ("^[a-z]+$", "abc\n", False),  # ECMA's `$` is the end (Python's `re` took "abc\n")
        ("b", "abc", True),  # search, not a full match
        ("a.c", "a\nc", False),
        ("a.c", "a\u2028c", False),  # `.` stops at every ECMA line terminator
        ("^\\s$", "\u00a0", True),  # ECMA's white space is Unicode's
        ("^\\S$", "\u3000", False),
        ("^[\\s]$", "\ufeff", True),
        ("^[^\\S]$", "\t", True),
        ("\\d", "\u0663", False),  # ASCII digits only, as in ECMA
        ("\\u00e9", "\u00e9", True),
        ("\\ud83d\\ude00", "\U0001f600", True),  # a surrogate pair is one code point
        ("\\u{1F600}", "\U0001f600", True),
        ("(?<year>\\d{4})-", "2024-", True),
        ("[^]", "\n", True),
        ("[]", "a", False),
        ("a{,5}", "a{,5}", True),  # Annex B: no quantifier, a literal
        ("x]}", "x]}", True),
        ("[[:alpha:]]", "[]", True),  # no POSIX class in ECMA: `[`, `:`, `a` ... then `]`
        ("\\/", "/", True),
        ("\\cJ", "\n", True),
        ("[\\b]", "\b", True),
        ("^\\p{Lu}", "\u00c9x", True),
    ],
)
def test_patterns_keep_their_ecma_meaning(pattern: str, text: str, matches: bool) -> None:
    """Each pattern matches (or not) as an ECMA-262 engine would, though RE2 runs it."""
    assert compile_pattern(pattern).search(text) is matches


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?=a)", "it uses lookaround or a backreference, which a linear-time engine cannot run"),
        ("a(?!b)", "it uses lookaround or a backreference"),
        ("(?<=a)b", "it uses lookaround or a backreference"),
        ("(?<!a)b", "it uses lookaround or a backreference"),
        ("(a)\\1", "it uses lookaround or a backreference"),
        ("(?<n>a)\\k<n>", "it uses lookaround or a backreference"),
        ("a{1001}", "not a pattern RE2 can run (invalid repetition size: {1001})"),
        ("[a", "not a valid pattern: a `[` is never closed"),
        ("(?i)a", "a group `(?` of a form ECMA-262 patterns do not have"),
        ("\\ud800", "it names a lone surrogate"),
    ],
)
def test_what_a_linear_engine_cannot_run_is_refused_saying_why(pattern: str, reason: str) -> None:
    """Refused (fail closed) naming the pattern and the reason, never matched with `re`."""
    with pytest.raises(PatternRefused) as refused:
        compile_pattern(pattern)
    assert str(refused.value).startswith(f"the pattern '{pattern}' cannot be used: {reason}")


def test_each_pattern_is_compiled_once_per_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check's patterns are kept: asked twice, compiled once (a refusal too)."""
    compiled: list[str] = []
    real = compile_pattern

    def counting(pattern: str) -> object:
        compiled.append(pattern)
        return real(pattern)

    monkeypatch.setattr("bot.app.checks.ecma_regex.compile_pattern", counting)
    patterns = Patterns()
    assert patterns.get("^a") is patterns.get("^a")
    for _ in range(2):
        with pytest.raises(PatternRefused):
            patterns.get("(?=a)")
    assert compiled == ["^a", "(?=a)"]


def test_formats_are_enforced() -> None:
    """`format` fails values that are not what it names, on every listed format, `regex` on RE2
    (a lookahead is named as such); good values pass."""
    formats = {
        "d": "date",
        "t": "date-time",
        "c": "time",
        "e": "email",
        "h": "hostname",
        "i": "ipv4",
        "s": "ipv6",
        "u": "uri",
        "q": "uuid",
        "r": "regex",
    }
    schema = json.dumps({"properties": {k: {"format": f} for k, f in formats.items()}})
    rules = [ValidatorRule("*.json", "schema.json")]
    good = {
        "d": "2024-02-29",
        "t": "2024-02-29T12:00:00Z",
        "c": "12:00:00Z",
        "e": "a@example.com",
        "h": "web.example.com",
        "i": "10.0.0.1",
        "s": "::1",
        "u": "https://example.com/x",
        "q": "12345678-1234-1234-1234-123456789abc",
        "r": "^[a-z]+$",
    }
    bad = {
        "d": "2023-02-30",
        "t": "2024-02-29T25:00:00Z",
        "c": "noon",
        "e": "nobody",
        "h": "-web-",
        "i": "10.0.0.256",
        "s": "::g",
        "u": "not a uri",
        "q": "1234",
        "r": "(?=a)",
    }
    assert check_files([ChangedFile("good.json", json.dumps(good))], rules, lambda _: schema) == []
    found = check_files([ChangedFile("bad.json", json.dumps(bad))], rules, lambda _: schema)
    messages = sorted(p.message for p in found)
    assert len(messages) == len(bad), messages
    assert "'2023-02-30' is not a 'date' (at /d)" in messages
    assert "'-web-' is not a 'hostname' (at /h)" in messages
    assert (
        "the pattern '(?=a)' cannot be used: it uses lookaround or a backreference, which a "
        "linear-time engine cannot run (at /r)"
    ) in messages
