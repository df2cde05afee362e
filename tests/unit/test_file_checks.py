"""The validators of a change's files (bot/app/checks) from values alone: where each syntax and
schema problem is, what is not validated, the YAML alias bomb, and the preview's counts and cut."""

from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path

import pytest

from bot.app.checks import (
    ChangedFile,
    Problem,
    ValidatorRule,
    changed_files,
    check_files,
    describe_problems,
)
from bot.app.checks.ecma_regex import MAX_MATCH_COST, compile_pattern
from bot.app.checks.preview import MAX_DIFF_LINES, build_preview, diffstat, preview_summary
from bot.app.checks.syntax import MAX_DEPTH

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "ports": {"type": "array", "items": {"type": "integer"}},
        },
    }
)
RULES = [ValidatorRule("config/**", "schema.json")]


def check(path: str, content: str | None, schema: str | None = SCHEMA) -> list[str]:
    """The problems of one file under RULES, as lines."""
    found = check_files([ChangedFile(path, content)], RULES, lambda _: schema)
    return [str(p) for p in found]


def test_syntax_problems_carry_line_and_column() -> None:
    """YAML, JSON and TOML errors name the file, the line and the column where parsing stops."""
    assert check("a.yml", "a: 1\nb: : 2\n")[0].startswith("a.yml:2:4: yaml: ")
    assert check("a.json", '{"a": 1,\n "b" 2}')[0].startswith("a.json:2:6: json: Expecting ':'")
    assert check("a.toml", "[x]\ny = [1,\n")[0].startswith("a.toml:3:1: toml: ")


def test_other_files_and_deleted_files_are_not_validated() -> None:
    """A file of no known kind, or one the change deletes, has no problem."""
    assert check("README.md", "{{{ not yaml") == []
    assert check("config/x.yaml", None) == []


def test_schema_errors_point_at_the_value() -> None:
    """A schema violation in YAML (a second document too) and in JSON is at the value's start,
    with its JSON pointer."""
    yaml_text = "replicas: 1\n---\nports:\n  - 80\n  - http\n"
    assert check("config/app.yaml", yaml_text) == [
        "config/app.yaml:5:5: schema schema.json: 'http' is not of type 'integer' (at /ports/1)"
    ]
    json_text = '{"ports": [80,\n  "x"], "replicas": "3"}'
    assert check("config/app.json", json_text) == [
        "config/app.json:2:3: schema schema.json: 'x' is not of type 'integer' (at /ports/1)",
        "config/app.json:2:21: schema schema.json: '3' is not of type 'integer' (at /replicas)",
    ]


def test_only_the_rules_glob_gets_the_schema() -> None:
    """A file outside the glob is checked for syntax only."""
    assert check("other/app.yaml", "replicas: many\n") == []
    assert check("config/deep/app.yaml", "replicas: many\n") != []


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (None, "schema.json:1:1: schema: the schema file does not exist"),
        ("{nope", "schema.json:1:2: schema: Expecting property name enclosed in double quotes"),
        ('{"type": 3}', "schema.json:1:1: schema: not a valid JSON Schema: "),
    ],
)
def test_a_missing_or_broken_schema_is_a_problem_naming_it(
    schema: str | None, expected: str
) -> None:
    """The schema file itself is the problem, named once for every file it applies to."""
    files = [ChangedFile("config/a.yaml", "a: 1\n"), ChangedFile("config/b.yaml", "b: 1\n")]
    found = check_files(files, RULES, lambda _: schema)
    assert len(found) == 1
    assert str(found[0]).startswith(expected)


def test_a_remote_reference_is_never_fetched() -> None:
    """A `$ref` to a URL is a problem naming it, not a request (tests/hardening/test_schema_refs.py
    proves no connection is opened)."""
    schema = json.dumps({"$ref": "https://schemas.example.com/app.json"})
    [problem] = check("config/a.yaml", "a: 1\n", schema)
    assert problem == (
        "config/a.yaml:1:1: schema schema.json: $ref 'https://schemas.example.com/app.json' not "
        "followed: outside this repository (references are never fetched): "
        "'https://schemas.example.com/app.json'"
    )


def test_a_yaml_alias_bomb_is_refused_and_ordinary_anchors_pass() -> None:
    """Aliases expanding past the node budget are a problem; a merge key with an anchor is fine."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 9):
        refs = ", ".join([f"*a{n - 1}"] * 10)
        lines.append(f"a{n}: &a{n} [{refs}]")
    [problem] = check("bomb.yaml", "\n".join(lines) + "\n")
    assert "once its aliases are expanded" in problem
    assert check("ok.yaml", "base: &b {x: 1}\nprod:\n  <<: *b\n  y: 2\n") == []


def test_base64_content_is_decoded_and_binary_is_a_problem() -> None:
    """A base64 file is validated as its text; bytes that are not UTF-8 cannot be YAML."""
    files = changed_files(
        [
            {
                "path": "a.yaml",
                "content": base64.b64encode(b"a: [1\n").decode(),
                "encoding": "base64",
            },
            {
                "path": "b.yaml",
                "content": base64.b64encode(b"\xff\xfe").decode(),
                "encoding": "base64",
            },
        ]
    )
    found = check_files(files, [], lambda _: None)
    assert [(p.path, p.validator) for p in found] == [("a.yaml", "yaml"), ("b.yaml", "yaml")]
    assert found[1].message == "not UTF-8 text"


def test_problems_are_described_one_per_line_with_a_cap() -> None:
    """The error detail: `path:line:col: validator: message` lines, the rest counted."""
    problems = [Problem(f"f{n}.json", n, 1, "json", "bad") for n in range(1, 25)]
    text = describe_problems(problems)
    assert text.splitlines()[0] == "f1.json:1:1: json: bad"
    assert text.splitlines()[-1] == "and 4 more"


def test_the_preview_counts_lines_and_cuts_the_diff() -> None:
    """Added and removed lines per file; past MAX_DIFF_LINES the diff is cut and says so."""
    files = [
        ChangedFile("a.yaml", "x: 2\ny: 1\n"),
        ChangedFile("b.yaml", "".join(f"k{n}: 1\n" for n in range(300))),
        ChangedFile("c.yaml", None),
    ]
    preview = build_preview(files, {"a.yaml": "x: 1\ny: 1\n", "b.yaml": None, "c.yaml": "z: 1\n"})
    assert diffstat(preview) == [
        "- update a.yaml (+1 -1)",
        "- create b.yaml (+300 -0)",
        "- delete c.yaml (+0 -1)",
    ]
    assert preview["truncated"] is True
    assert len(preview["diff"].split("\n")) == MAX_DIFF_LINES
    assert preview["diff"].startswith("--- a/a.yaml\n+++ b/a.yaml\n@@")


def test_files_past_the_read_cap_are_listed_without_counts() -> None:
    """A file whose current content was not read is listed with what the change does to it."""
    preview = build_preview([ChangedFile("a.yaml", "x: 1\n")], {})
    assert diffstat(preview) == ["- write a.yaml"]
    assert preview["diff"] == ""


TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize(
    ("path", "content", "expected"),
    [
        # 600 deep: each parser would recurse past Python's limit; the bracket that goes one
        # level too deep is named
        ("a.toml", "a = " + "[" * 600 + "]" * 600, f"a.toml:1:{4 + MAX_DEPTH}: toml: {TOO_DEEP}"),
        ("a.toml", "a = " + "{b = " * 600 + "1" + "}" * 600, f"a.toml:1:{5 * MAX_DEPTH}: "),
        ("a.json", "[" * 990 + "]" * 990, f"a.json:1:{MAX_DEPTH + 1}: json: {TOO_DEEP}"),
        ("a.json", '{"a":\n' + "[" * 600 + "]" * 600 + "}", f"a.json:2:{MAX_DEPTH}: json: "),
        ("a.yaml", "[" * 600 + "]" * 600, f"a.yaml:1:{MAX_DEPTH + 1}: yaml: {TOO_DEEP}"),
        (
            "a.yml",
            "".join("  " * n + "a:\n" for n in range(300)) + "  " * 300 + "b: 1\n",
            "a.yml:65:",
        ),
        # TOML tables nest without brackets
        ("a.toml", "[" + ".".join(["t"] * 100) + "]\nx = 1\n", f"a.toml:1:1: toml: {TOO_DEEP}"),
    ],
)
def test_a_deeply_nested_file_is_a_problem_at_its_position(
    path: str, content: str, expected: str
) -> None:
    """Nesting past MAX_DEPTH is a syntax problem naming the file and where (the parsers
    recursed into a RecursionError before: "unexpected RecursionError", no position)."""
    [problem] = check(path, content)
    assert problem.startswith(expected)
    assert problem.endswith(TOO_DEEP)


def test_nesting_up_to_the_limit_parses_and_brackets_in_strings_do_not_count() -> None:
    """MAX_DEPTH levels are fine; brackets inside strings and comments nest nothing."""
    assert check("a.json", "[" * MAX_DEPTH + "]" * MAX_DEPTH) == []
    assert check("a.yaml", "[" * MAX_DEPTH + "]" * MAX_DEPTH) == []
    assert check("a.toml", "a = " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)) == []
    assert check("a.json", json.dumps({"s": "[" * 500, "t": ["{" * 500]})) == []
    toml = f"a = \"{'[' * 100}\"\n# {'[' * 100}\nb = '''{'{' * 100}'''\nc = [[1]]\n"
    assert check("a.toml", toml) == []


def test_yaml_aliases_cannot_nest_past_the_limit() -> None:
    """Each anchor one level deeper than the last: the composer never nests deep, the aliases
    do; the document is refused where it passes the limit, and a cycle as too many nodes."""
    lines = ["a0: &a0 [1]"] + [f"a{n}: &a{n} [*a{n - 1}]" for n in range(1, 100)]
    [problem] = check("chain.yaml", "\n".join(lines) + "\n")
    assert problem == f"chain.yaml:{MAX_DEPTH}:6: yaml: {TOO_DEEP}"
    [cycle] = check("cycle.yaml", "a: &a [*a]\n")
    assert cycle.endswith("once its aliases are expanded")


def test_a_deeply_nested_file_against_a_schema_is_a_problem_not_a_crash() -> None:
    """A file at the depth limit validated against a recursive schema, and a schema that
    refers to itself without end: problems, not RecursionError."""
    recursive = json.dumps({"type": ["object", "integer"], "additionalProperties": {"$ref": "#"}})
    deep = (
        "".join("  " * n + "a:\n" for n in range(MAX_DEPTH - 1)) + "  " * (MAX_DEPTH - 1) + "a: x"
    )
    [problem] = check("config/deep.yaml", deep, recursive)
    assert f"config/deep.yaml:{MAX_DEPTH}:{2 * MAX_DEPTH + 2}: " in problem
    assert "'x' is not of type 'object', 'integer'" in problem
    [loop] = check("config/a.yaml", "a: 1\n", json.dumps({"$ref": "#"}))
    assert loop.endswith(
        ": schema schema.json: the schema refers to itself without end (a $ref cycle)"
    )


PATTERNS = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": {"type": "integer"},
    }
)


def test_no_pattern_sees_a_text_longer_than_its_bound() -> None:
    """Each match costs at most MAX_MATCH_COST (the text's length times the compiled pattern's
    size): a value or key past a pattern's bound is a problem where it stands, never matched
    and never let through unmatched; a small pattern matches long texts."""
    long_json = json.dumps({"name": "a" * 100_000, "x-" + "k" * 100_000: "v"})
    assert check("config/a.json", long_json, PATTERNS) == []
    big = "^[a-z]{0,900}[a-z]{0,900}$"  # some 3,600 RE2 instructions
    longest = MAX_MATCH_COST // compile_pattern(big).size
    schema = json.dumps({"properties": {"name": {"pattern": big}}, "patternProperties": {big: {}}})
    assert check("config/a.yaml", f"name: {'a' * 1800}\n", schema) == []
    [long_value] = check("config/a.yaml", f"name: {'a' * (longest + 1)}\n", schema)
    assert long_value == (
        f"config/a.yaml:1:7: schema schema.json: {longest + 1} characters, more than the "
        f"{longest} the pattern '^[a-z]{{0,900}}[a-z]{{0,900}}$' is matched against (at /name)"
    )
    [long_key] = check("config/a.json", json.dumps({"k" * (longest + 1): "v"}), schema)
    assert long_key.startswith(f"config/a.json:1:1: schema schema.json: a key of {longest + 1} ")


def test_a_key_that_is_not_a_string_is_a_problem_where_patterns_apply() -> None:
    """YAML allows `80: http`; `re` cannot match an integer (a TypeError before)."""
    [problem] = check("config/a.yaml", "80: http\n", PATTERNS)
    assert problem == (
        "config/a.yaml:1:1: schema schema.json: the key 80 is not a string, which a pattern is "
        "matched against (at /)"
    )


def counts(old: str, new: str) -> tuple[int, int]:
    """(added, removed) the preview counts for one file going from `old` to `new`."""
    [entry] = build_preview([ChangedFile("f.yaml", new)], {"f.yaml": old})["files"]
    return entry["added"], entry["removed"]


def test_repetitive_files_are_counted_right() -> None:
    """Lines that make up more than 1% of a long file are still matched (difflib's autojunk
    counted these files as wholly removed and added again: +300 -300, +50001 -50000)."""
    items = "".join("- item\n" for _ in range(300))
    edited = "".join("- item\n" if n % 50 else "- other\n" for n in range(300))
    assert counts(items, edited) == (6, 6)
    entries = "".join("- name: x\n  value: 1\n" for _ in range(25_000))  # 50,000 lines
    assert counts(entries, "# generated\n" + entries + entries) == (50_001, 0)
    services = [f"- name: svc-{n}\n  port: 80\n  protocol: TCP\n" for n in range(7_000)]
    changed = [s.replace("80", "8080") if n % 500 == 0 else s for n, s in enumerate(services)]
    assert counts("".join(services), "".join(changed)) == (14, 14)


def test_the_diff_shown_follows_the_same_matching() -> None:
    """The hunks shown are those counted: one line changed in a repetitive file is one hunk."""
    items = "".join("- item\n" for _ in range(300))
    edited = items.replace("- item\n", "- other\n", 1)
    preview = build_preview([ChangedFile("f.yaml", edited)], {"f.yaml": items})
    assert preview["diff"].split("\n") == [
        "--- a/f.yaml",
        "+++ b/f.yaml",
        "@@ -1,4 +1,4 @@",
        "-- item",
        "+- other",
        " - item",
        " - item",
        " - item",
    ]


def test_matching_huge_files_stays_within_its_budget() -> None:
    """Ten files of 20,000 lines drawn from 300 values in random order (the worst case for
    exact matching and for difflib's heuristic alike): the preview is built in about a second,
    and every count is still a correct diff's."""
    rng = random.Random(5)
    originals: dict[str, str | None] = {}
    files = []
    for n in range(10):
        old = "".join(f"v{rng.randrange(300)}\n" for _ in range(20_000))
        new = "".join(f"v{rng.randrange(300)}\n" for _ in range(20_000 + n))
        originals[f"f{n}"] = old
        files.append(ChangedFile(f"f{n}", new))
    started = time.monotonic()
    preview = build_preview(files, originals)
    assert time.monotonic() - started < 5
    for n, entry in enumerate(preview["files"]):
        assert entry["added"] - entry["removed"] == n
        assert entry["removed"] <= 20_000


ROOT = Path(__file__).resolve().parents[2]


def test_the_protocol_and_the_readme_describe_the_preview_approvers_get() -> None:
    """docs/approval-protocol.md shows each paragraph the bot adds to the approval request's
    description for its preview, as the bot writes it; the README says where validators come
    from (not "none yet ... until the policy file supplies them")."""
    files = [ChangedFile("config/big.yaml", "".join(f"k{n}: 1\n" for n in range(300)))]
    preview = build_preview(files, {"config/big.yaml": None})
    paragraphs = preview_summary(preview, "https://gitlab.example.com/g/p/-/merge_requests/7")
    protocol = (ROOT / "docs" / "approval-protocol.md").read_text(encoding="utf-8")
    starts = [paragraph.split("\n", 1)[0].split(": https://")[0] for paragraph in paragraphs]
    assert starts == [
        "This preview is partial (the diff is cut short); the whole change is on the merge request",
        "Preview (lines added and removed):",
        "Diff:",
    ]
    starts[0] = "This preview is partial ("  # the protocol names what `<what>` may say
    for start in starts:
        assert start in protocol.replace("\n   ", " "), start
    assert diffstat(preview)[0] == "- create config/big.yaml (+300 -0)"
    assert "- <action> <path> (+<added> -<removed>)" in protocol
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    checks = readme.split("## Preview and checks before approval", 1)[1].split("\n## ", 1)[0]
    assert "none yet" not in checks
    assert "`validators`" in checks
