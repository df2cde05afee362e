"""Which validators apply to which changed file, and their problems as file:line:col lines.

Every check runs under a Budget (budget.py): a file's checks stop at its own deadline or the
change's, whichever comes first, with a problem saying the file was not checked; a file after it
gets its own deadline, so one hostile file does not leave the others unchecked (it can only use
up the change's limit, after which each file left says so).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from bot.app.checks.budget import Budget, OutOfTime
from bot.app.checks.ecma_regex import Patterns
from bot.app.checks.keywords import Run
from bot.app.checks.refs import Broken, SchemaFiles
from bot.app.checks.schema import validate_schema
from bot.app.checks.syntax import SyntaxProblem, parse
from bot.core.identity import DELETE
from bot.core.path_policy import included_by
from bot.heartbeat import beat
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
    budget: Budget | None = None,
) -> list[Problem]:
    """Every problem of the files a change writes (deleted files are not validated): syntax by
    extension, then each JSON Schema whose rule's glob names the file. Schema files are read
    once (and at most refs.MAX_REFERENCED more by `$ref`); each file's checks take at most
    `budget.per_file` seconds and all of them `budget.per_change` (budget.py): past either,
    the file is a problem saying it was not checked, and the next file still gets its own."""
    clock = (budget or Budget()).start()
    schemas = SchemaFiles(read_schema)
    patterns = Patterns()
    validators: dict[str, Any] = {}
    problems: list[Problem] = []
    for file in files:
        if file.content is None:
            continue
        beat()  # a file's checks may take MAX_FILE_SECONDS: the step's lease is renewed between
        if clock.spent():
            problems.append(Problem(file.path, 1, 1, "checks", clock.change_spent()))
            continue
        deadline = clock.for_file()
        try:
            run = Run(deadline, patterns)
            problems.extend(_check(file, file.content, rules, schemas, validators, run))
        except OutOfTime as exc:  # between two steps of the checks: the file is not checked
            problems.append(Problem(file.path, 1, 1, "checks", str(exc)))
    return _unique(problems)


def _check(
    file: ChangedFile,
    content: str,
    rules: Sequence[ValidatorRule],
    schemas: SchemaFiles,
    validators: dict[str, Any],
    run: Run,
) -> list[Problem]:
    """The problems of one file: its syntax, then each schema its rules' globs apply."""
    deadline = run.deadline
    parsed = parse(file.path, content, deadline)
    if isinstance(parsed, SyntaxProblem):
        return [Problem(file.path, parsed.line, parsed.column, *parsed.what)]
    problems: list[Problem] = []
    for rule in rules:
        deadline.check()
        if rule.schema is None or included_by(file.path, [rule.glob]) is None:
            continue
        name = rule.schema
        if parsed is None:  # an extension without a parser: nothing to validate against
            problems.append(
                Problem(file.path, 1, 1, f"schema {name}", "not a YAML, JSON or TOML file")
            )
            continue
        loaded = schemas.load(name, deadline)
        if isinstance(loaded, Broken):
            problems.append(Problem(name, loaded.line, loaded.column, "schema", loaded.message))
            continue
        if name not in validators:
            validators[name] = schemas.validator(loaded)
        problems.extend(
            Problem(file.path, line, column, f"schema {name}", message)
            for line, column, message in validate_schema(validators[name], parsed, run)
        )
    return problems


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
