"""Which validators apply to which changed file, and their problems as file:line:col lines."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from bot.app.checks.schema import schema_deadline, schema_error, validate_schema
from bot.app.checks.syntax import Parsed, SyntaxProblem, parse
from bot.core.identity import DELETE
from bot.core.path_policy import included_by
from bot.policy import Policy

#: The most problems reported for one change (the error detail and the status comment are short).
MAX_PROBLEMS = 20


class ValidatorRule(NamedTuple):
    """A path glob (`*` within a segment, `**` across) and the repository path of the JSON
    Schema its files must satisfy (None: syntax only, which every file gets anyway)."""

    glob: str
    schema: str | None = None


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """One file of a change as it will be: its path and text (None: the change deletes it)."""

    path: str
    content: str | None


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a file cannot go to approval, where (1-based line and column) and which validator."""

    path: str
    line: int
    column: int
    validator: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.validator}: {self.message}"


def rules_for(policy: Policy) -> list[ValidatorRule]:
    """The validator rules of the policy a change recorded (its `validators`): syntax is always
    checked; a rule naming a schema adds that JSON Schema for its glob."""
    return [ValidatorRule(glob, schema) for glob, schema in policy.validators]


def changed_files(files: Iterable[Mapping[str, Any]]) -> list[ChangedFile]:
    """The operation's stored files as ChangedFile (base64 content decoded; undecodable or
    non-UTF-8 content is kept as None text only when deleted, else reported by the checks)."""
    out: list[ChangedFile] = []
    for spec in files:
        path = str(spec.get("path") or "")
        if spec.get("action") == DELETE:
            out.append(ChangedFile(path, None))
            continue
        content = str(spec.get("content") or "")
        if spec.get("encoding") == "base64":
            try:
                content = base64.b64decode(content, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                content = "\x00"  # binary: no text validator applies (syntax() says so)
        out.append(ChangedFile(path, content))
    return out


def check_files(
    files: Sequence[ChangedFile],
    rules: Sequence[ValidatorRule],
    read_schema: Callable[[str], str | None],
) -> list[Problem]:
    """Every problem of the files a change writes (deleted files are not validated): syntax by
    extension, then each JSON Schema whose rule's glob names the file. Schemas are read once;
    all the schema checks together take at most schema.MAX_SCHEMA_SECONDS."""
    problems: list[Problem] = []
    schemas: dict[str, tuple[Any, Problem | None]] = {}
    deadline = schema_deadline()
    for file in files:
        if file.content is None:
            continue
        parsed = parse(file.path, file.content)
        if isinstance(parsed, SyntaxProblem):
            problems.append(Problem(file.path, parsed.line, parsed.column, *parsed.what))
            continue
        for rule in rules:
            if rule.schema is None or included_by(file.path, [rule.glob]) is None:
                continue
            if rule.schema not in schemas:
                schemas[rule.schema] = _load_schema(rule.schema, read_schema)
            schema, broken = schemas[rule.schema]
            if broken is not None:
                problems.append(broken)
                continue
            problems.extend(_schema_problems(file, parsed, rule.schema, schema, deadline))
    return _unique(problems)


def _schema_problems(
    file: ChangedFile, parsed: Parsed | None, name: str, schema: Any, deadline: float
) -> list[Problem]:
    if parsed is None:  # an extension without a parser: nothing to validate against a schema
        return [Problem(file.path, 1, 1, f"schema {name}", "not a YAML, JSON or TOML file")]
    return [
        Problem(file.path, line, column, f"schema {name}", message)
        for line, column, message in validate_schema(schema, parsed, deadline)
    ]


def _load_schema(path: str, read_schema: Callable[[str], str | None]) -> tuple[Any, Problem | None]:
    """The schema file parsed, or the problem that names it (missing, not JSON/YAML, invalid)."""
    text = read_schema(path)
    if text is None:
        return None, Problem(path, 1, 1, "schema", "the schema file does not exist")
    parsed = parse(path if path.endswith((".yml", ".yaml")) else "schema.json", text)
    if isinstance(parsed, SyntaxProblem):
        return None, Problem(path, parsed.line, parsed.column, "schema", parsed.what[1])
    assert parsed is not None
    if len(parsed.documents) != 1:
        return None, Problem(path, 1, 1, "schema", "a schema file holds one document")
    broken = schema_error(parsed.documents[0])
    if broken is not None:
        return None, Problem(path, 1, 1, "schema", broken)
    return parsed.documents[0], None


def _unique(problems: list[Problem]) -> list[Problem]:
    """Each problem once (a broken schema named by several files is said once), in order."""
    seen: set[Problem] = set()
    out: list[Problem] = []
    for problem in problems:
        if problem not in seen:
            seen.add(problem)
            out.append(problem)
    return out


def describe_problems(problems: Sequence[Problem], limit: int = MAX_PROBLEMS) -> str:
    """The problems as `path:line:col: validator: message` lines (at most `limit`)."""
    lines = [str(p) for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"and {len(problems) - limit} more")
    return "\n".join(lines)
