"""A repository's JSON Schema is hostile input: its `$ref` never opens a connection or reads a
local file. Each reference outside the repository is a problem naming it, and a local server
that records every connection (tests/hardening/recorder.py) sees none; references to other
schema files of the same repository, read through the change's `read_schema` at its commit,
work, within their bounds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bot.app.checks import ChangedFile, ValidatorRule, check_files
from bot.app.checks.refs import MAX_REFERENCED
from tests.hardening.recorder import Recorder, recording

RULES = [ValidatorRule("config/**", "schemas/app.json")]
FILE = ChangedFile("config/prod.yaml", "replicas: 3\nname: web\n")


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A local server that records each connection and never answers."""
    with recording() as server:
        yield server


def check(schema: Any, repository: dict[str, Any] | None = None) -> list[str]:
    """The problems of FILE under `schemas/app.json` = `schema`, the other repository files
    given (dicts as JSON, strings as they are)."""
    files = {"schemas/app.json": schema, **(repository or {})}
    texts = {p: c if isinstance(c, str) else json.dumps(c) for p, c in files.items()}
    return [str(p) for p in check_files([FILE], RULES, texts.get)]


def refused(ref: str, resolved: str | None = None) -> str:
    """The problem of FILE whose schema's `$ref` `ref` (resolved to `resolved`) is not followed."""
    return (
        f"config/prod.yaml:1:1: schema schemas/app.json: $ref '{ref}' not followed: outside this "
        f"repository (references are never fetched): '{resolved or ref}'"
    )


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_reference_to_a_server_opens_no_connection(recorder: Recorder, scheme: str) -> None:
    """`$ref: http(s)://127.0.0.1:<port>/x.json`, a server that never answers: the check ends
    at once with a problem naming the reference, and the server saw no connection (jsonschema's
    default registry fetched it with urlopen and no timeout: the step hung)."""
    ref = f"{scheme}://127.0.0.1:{recorder.port}/x.json"
    found = check({"$ref": ref})
    assert recorder.connections == 0
    assert found == [refused(ref)]


def test_a_redirecting_server_is_never_asked(recorder: Recorder) -> None:
    """A reference to a server that would redirect to another: neither sees a connection."""
    with recording(redirect_to=f"{recorder.url}/passwd") as redirector:
        ref = f"{redirector.url}/schema.json"
        found = check({"properties": {"name": {"$ref": ref}}})
        assert (redirector.connections, recorder.connections) == (0, 0)
        assert found == [refused(ref)]


def test_a_local_file_is_never_read() -> None:
    """`$ref: file:///etc/passwd` is a problem naming it; nothing of the file is quoted."""
    found = check({"$ref": "file:///etc/passwd"})
    assert found == [refused("file:///etc/passwd")]
    assert not any("root:" in problem for problem in found)


def test_an_absolute_id_moves_its_relative_references_off_the_repository(
    recorder: Recorder,
) -> None:
    """A schema whose `$id` is the server's URL: its `sibling.json` resolves there and is
    refused naming both the reference and where it leads; no connection."""
    schema = {"$id": f"{recorder.url}/schemas/app.json", "$ref": "sibling.json"}
    found = check(schema)
    assert recorder.connections == 0
    assert found == [refused("sibling.json", f"{recorder.url}/schemas/sibling.json")]


def test_a_urn_without_a_resource_is_refused_and_one_with_a_resource_resolves() -> None:
    """`urn:` names nothing to fetch: refused unless a subschema of the schema declares it."""
    assert check({"$ref": "urn:example:replicas"}) == [refused("urn:example:replicas")]
    declared = {
        "$defs": {"r": {"$id": "urn:example:replicas", "type": "object"}},
        "$ref": "urn:example:replicas",
    }
    assert check(declared) == []


def test_references_to_other_schema_files_of_the_repository_work() -> None:
    """`common.json#/$defs/...`, `../shared/...` and a YAML schema are read through the change's
    `read_schema` (at its commit): a valid file passes, an invalid one fails at its position."""
    app = {
        "type": "object",
        "properties": {
            "replicas": {"$ref": "common.json#/$defs/replicas"},
            "name": {"$ref": "../shared/name.yaml"},
        },
    }
    repository = {
        "schemas/common.json": {"$defs": {"replicas": {"type": "integer", "maximum": 2}}},
        "shared/name.yaml": "type: string\npattern: '^[a-z]+$'\n",
    }
    asked: list[str] = []

    def read(path: str) -> str | None:
        asked.append(path)
        found = {"schemas/app.json": app, **repository}.get(path)
        return found if found is None or isinstance(found, str) else json.dumps(found)

    [problem] = [str(p) for p in check_files([FILE], RULES, read)]
    assert problem == (
        "config/prod.yaml:1:11: schema schemas/app.json: 3 is greater than the maximum of 2 "
        "(at /replicas)"
    )
    assert sorted(asked) == ["schemas/app.json", "schemas/common.json", "shared/name.yaml"]
    ok = ChangedFile("config/ok.yaml", "replicas: 1\nname: web\n")
    assert check_files([ok], RULES, read) == []


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("../../etc/passwd", "above the repository's root"),
        ("/etc/passwd", "above the repository's root"),
        ("%2e%2e/%2e%2e/x.json", "not a path of this repository: it has a '..' segment"),
        ("common.json?raw=1", "a query names no schema file"),
    ],
)
def test_a_reference_leaving_the_repository_root_is_refused(ref: str, why: str) -> None:
    """`..` past the root, an absolute path, an encoded `..`: refused naming the reference."""
    [problem] = check({"$ref": ref})
    assert problem.startswith(f"config/prod.yaml:1:1: schema schemas/app.json: $ref '{ref}' ")
    assert why in problem


def test_reference_cycles_missing_and_broken_files_are_problems() -> None:
    """a.json -> b.json -> a.json loops: a problem, not a RecursionError; a missing or broken
    referenced file is named with where it breaks."""
    loop = {"schemas/a.json": {"$ref": "b.json"}, "schemas/b.json": {"$ref": "a.json"}}
    assert check({"$ref": "a.json"}, loop) == [
        "config/prod.yaml:1:1: schema schemas/app.json: the schema refers to itself without end "
        "(a $ref cycle)"
    ]
    assert check({"$ref": "gone.json"}) == [
        "config/prod.yaml:1:1: schema schemas/app.json: $ref 'gone.json' not followed: "
        "'schemas/gone.json' line 1 column 1: the schema file does not exist"
    ]
    broken = {"schemas/bad.json": '{"type": "object",\n "pattern": "(?<=x)y"}'}
    assert check({"$ref": "bad.json"}, broken) == [
        "config/prod.yaml:1:1: schema schemas/app.json: $ref 'bad.json' not followed: "
        "'schemas/bad.json' line 1 column 1: the pattern '(?<=x)y' cannot be used: it uses "
        "lookaround or a backreference, which a linear-time engine cannot run"
    ]


def test_at_most_the_limit_of_schema_files_are_referenced_per_change() -> None:
    """A chain of MAX_REFERENCED + 5 files: the one past the limit is refused naming it."""
    chain = {f"schemas/s{n}.json": {"$ref": f"s{n + 1}.json"} for n in range(MAX_REFERENCED + 5)}
    [problem] = check({"$ref": "s0.json"}, chain)
    assert problem == (
        f"config/prod.yaml:1:1: schema schemas/app.json: $ref 's{MAX_REFERENCED}.json' not "
        f"followed: more than {MAX_REFERENCED} schema files referenced in one change"
    )


def test_a_reference_to_what_is_not_a_schema_and_to_another_dialect_are_problems() -> None:
    """`$ref: '#/enum'` leads to a list (an AttributeError before); a draft-07 file referenced
    from a 2020-12 schema is refused naming both."""
    assert check({"enum": [{"replicas": 3, "name": "web"}], "$ref": "#/enum"}) == [
        "config/prod.yaml:1:1: schema schemas/app.json: a reference leads to a list, which is not "
        "a schema"
    ]
    draft7 = {"schemas/old.json": {"$schema": "http://json-schema.org/draft-07/schema#"}}
    assert check({"$ref": "old.json"}, draft7) == [
        "config/prod.yaml:1:1: schema schemas/app.json: $ref 'old.json' not followed: "
        "'schemas/old.json' is written in another JSON Schema dialect than 'schemas/app.json'"
    ]
