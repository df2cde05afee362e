"""Whatever a repository holds, parsing and checking it ends in an answer: `parse_policy` returns
a Policy or raises PolicyError, `syntax.parse` a parse or a SyntaxProblem, `check_files` a list
of problems; never another exception (the API answered 500 for a policy file holding an invalid
date, a 4,300-digit integer or a sexagesimal float past a float's range)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.app.checks import ChangedFile, Problem, ValidatorRule, check_files
from bot.app.checks.syntax import Parsed, SyntaxProblem, parse
from bot.policy import Policy, PolicyError, parse_policy

#: Pieces of YAML that reach the constructors and the composer's corners, joined at random.
FRAGMENTS = (
    "a: ",
    "\n",
    "  ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    ": ",
    "? ",
    "---\n",
    "...\n",
    "%YAML 1.1\n",
    "# c\n",
    "2023-02-30",
    "2023-13-45T99:00:00",
    "2020-01-01T00:00:00+99:99",
    "9" * 4400,
    "0x" + "f" * 4000,
    "1" + ":5" * 3000 + ".5",
    "1.0e+400",
    ".inf",
    ".nan",
    "~",
    "yes",
    "!!int ",
    "!!float ",
    "!!timestamp ",
    "!!bool ",
    "!!binary ",
    "!!set ",
    "!!omap ",
    "!!pairs ",
    "!!str ",
    "!!map ",
    "!!python/object ",
    "!local ",
    "&a ",
    "*a",
    "<<: ",
    "\x00",
    "\ufeff",
    "\u202e",
    '"\\ud800"',
    '"\\x00"',
    "'",
    '"',
    "version: ",
    "paths:\n  allowed: ",
    "deploy:\n  timeout: ",
    "approvals:\n  required: ",
    "poll:\n  pipeline_tiers: ",
    "validators:\n  - glob: ",
    "schema: ",
)
yamlish = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=12).map("".join)
texts = yamlish | st.text(max_size=200)
CASES = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


@CASES
@given(text=texts | st.binary(max_size=200))
@example(text="deploy:\n  timeout: 2023-02-30\n")
@example(text="a: " + "9" * 4400)
@example(text="a: 1" + ":5" * 3000 + ".5")
@example(text="a: !!bool maybe")
@example(text="a: !!timestamp x")
@example(text='a: "\\ud800"')
@example(text="a: \ud800")
@example(text=b"\xef\xbb\xbfa: 1\n")
@example(text=b"a: \xff")
def test_a_policy_file_is_a_policy_or_a_policy_error(text: str | bytes) -> None:
    """Any text or bytes: a Policy, or PolicyError naming file:line:col (line and column >= 1)."""
    try:
        answer: Policy | PolicyError = parse_policy(text)
    except PolicyError as exc:
        answer = exc
    assert isinstance(answer, Policy | PolicyError)
    for problem in answer.problems if isinstance(answer, PolicyError) else []:
        assert min(problem.line, problem.column) >= 1
        assert len(problem.message) <= 300


@CASES
@given(kind=st.sampled_from(["a.yaml", "a.json", "a.toml"]), text=texts)
@example(kind="a.json", text="[" + "9" * 4400 + "]")
@example(kind="a.json", text='{"a": "' + "9" * 4400 + '", "b": -' + "9" * 4400 + "}")
@example(kind="a.toml", text="a = " + "9" * 4400)
@example(kind="a.toml", text="a = 0x" + "f" * 4400)
@example(kind="a.yaml", text="a: 2023-13-45T99:00:00")
@example(kind="a.yaml", text="a: !" + "x" * 5000 + " 1")
def test_a_changed_file_parses_or_is_a_syntax_problem(kind: str, text: str) -> None:
    """YAML, JSON or TOML: parsed, or a problem at a line and column with a short message."""
    parsed = parse(kind, text)
    assert isinstance(parsed, Parsed | SyntaxProblem)
    if isinstance(parsed, SyntaxProblem):
        assert min(parsed.line, parsed.column) >= 1
        assert len(parsed.what[1]) <= 200


KEYWORDS = (
    "type",
    "pattern",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "properties",
    "items",
    "prefixItems",
    "uniqueItems",
    "enum",
    "const",
    "format",
    "$ref",
    "$dynamicRef",
    "$id",
    "$schema",
    "$defs",
    "anyOf",
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "required",
    "dependentSchemas",
    "minLength",
    "multipleOf",
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["#", "#/$defs/a", "x.json", "^a+$", "(?=a)", "date", "regex", "string"])
    | st.text(max_size=6)
)
schemas = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYWORDS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=16,
)


@CASES
@given(schema=schemas, content=texts, kind=st.sampled_from(["yaml", "json", "toml"]))
@example(schema={"$ref": "#/enum", "enum": [1]}, content="a: 1", kind="yaml")
@example(schema={"$ref": "#/const", "const": 3}, content="a: 1", kind="yaml")
@example(schema={"$schema": 5}, content="a: 1", kind="yaml")
@example(schema={"$schema": "http://[::1"}, content="a: 1", kind="yaml")
@example(schema={"properties": {"a": {"$schema": []}}}, content="a: 1", kind="yaml")
@example(schema={"patternProperties": {"^a": {}}}, content="1: 2\na: 3", kind="yaml")
def test_checking_files_answers_problems(schema: Any, content: str, kind: str) -> None:
    """A random schema file and a random changed file: `check_files` returns problems."""
    text = json.dumps(schema)
    rules = [ValidatorRule("config/**", "s.json")]
    found = check_files([ChangedFile(f"config/a.{kind}", content)], rules, lambda _: text)
    assert all(isinstance(p, Problem) for p in found)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("deploy:\n  timeout: 2023-02-30\n", "2:12: not a valid timestamp: day is out of range"),
        (f"deploy:\n  timeout: {'9' * 4400}\n", "2:12: an integer of more than 4300 digits"),
        ("a: 1" + ":5" * 3000 + ".5\n", "1:4: a number too large to read (float)"),
        ("a: !!bool maybe\n", "1:4: not a valid bool"),
        ('a: "\\ud800"\n', "1:4: a string holding a lone surrogate"),
        ("a: \x00\n", "1:4: unacceptable character #x0000"),
    ],
)
def test_values_the_constructors_cannot_make_are_problems_at_their_node(
    text: str, expected: str
) -> None:
    """Each value PyYAML's safe constructors raise a ValueError, OverflowError or KeyError on is
    a PolicyError at the value's line and column."""
    with pytest.raises(PolicyError) as refused:
        parse_policy(text)
    assert str(refused.value).startswith(f".gitops/bot.yml:{expected}")
