"""A parsed file against a repository's JSON Schema, each error at the line and column of the
value it is about: the YAML node's start, or the JSON value's first character.

Everything here is the repository's, written by people with Developer access, and bounded:

- `$ref` resolves only inside the schema and to other schema files of the same repository at
  the same commit (bot/app/checks/refs.py); anything else is a problem naming the reference,
  never fetched, never read. A `$ref` that leads back to itself is a problem too, not a
  RecursionError.
- `pattern`, `patternProperties` and `format: regex` run on RE2, a linear-time engine
  (bot/app/checks/ecma_regex.py); a pattern it cannot run is a problem naming it.
- `format` is enforced (bot/app/checks/keywords.py FORMATS).
- Every keyword the validator evaluates asks the file's deadline (bot/app/checks/budget.py):
  an exponential `anyOf` tree, a huge `uniqueItems` array or a slow format stops with a
  problem naming the file, on any runner (no signal: the embedded server's threads get none).

At most MAX_ERRORS problems are reported for a file, the first by position among the first
MAX_POSITIONED errors the validator finds in each document.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import jsonschema
import referencing.exceptions

from bot.app.checks.budget import OutOfTime
from bot.app.checks.ecma_regex import PatternRefused, shown
from bot.app.checks.keywords import Run, SchemaUnusable, pattern_refused, running
from bot.app.checks.refs import RefRefused
from bot.policy.parse import yaml_entry

if TYPE_CHECKING:
    from bot.app.checks.syntax import Parsed

#: The most schema errors reported for one file.
MAX_ERRORS = 10
#: The most errors of one document whose positions are found (each costs a walk of the file).
MAX_POSITIONED = 100

_WS = " \t\r\n"


def validate_schema(validator: Any, parsed: Parsed, run: Run) -> list[tuple[int, int, str]]:
    """(line, column, message) for each way the file's documents break the schema `validator`
    holds (refs.SchemaFiles.validator), in the order they appear in the file; one problem
    instead when the schema cannot be followed or `run`'s deadline passes."""
    found: list[tuple[int, int, str]] = []
    try:
        with running(run):
            for index, document in enumerate(parsed.documents):
                errors = []
                for error in validator.iter_errors(document):
                    run.deadline.check()
                    path = list(error.absolute_path)
                    errors.append((*_position(parsed, index, path), _message(error)))
                    if len(errors) >= MAX_POSITIONED:
                        break
                found.extend(sorted(errors))
                if len(found) >= MAX_ERRORS:
                    return found[:MAX_ERRORS]
    except OutOfTime as exc:
        return [(1, 1, str(exc))]
    except referencing.exceptions.Unresolvable as exc:
        return [(1, 1, _unresolvable(exc))]
    except RecursionError:  # documents are at most syntax.MAX_DEPTH deep: the schema loops
        return [(1, 1, "the schema refers to itself without end (a $ref cycle)")]
    except (PatternRefused, SchemaUnusable) as exc:
        return [(1, 1, str(exc))]
    except Exception as exc:  # noqa: BLE001 -- whatever else a hostile schema makes the library
        # raise stops this file's check with a problem (fail closed), never the step
        return [(1, 1, f"the schema cannot be applied to this file ({type(exc).__name__})")]
    return found


def _unresolvable(exc: referencing.exceptions.Unresolvable) -> str:
    """A `$ref` not followed, named, and why (never the text of what it names)."""
    ref = shown(str(getattr(exc, "ref", "")), 120)
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, RefRefused):
        cause = cause.__cause__
    if cause is not None:
        return f"$ref {ref} not followed: {cause}"
    if isinstance(exc, referencing.exceptions.PointerToNowhere):
        return f"$ref {ref} points at nothing in the schema"
    return f"$ref {ref}: the schema refers to what it does not hold"


def _message(error: jsonschema.ValidationError) -> str:
    pointer = "/" + "/".join(
        str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_path
    )
    message = pattern_refused(error) or error.message
    message = message if len(message) <= 200 else message[:199] + "…"
    return f"{message} (at {pointer})"


def _position(parsed: Parsed, document: int, path: Sequence[Any]) -> tuple[int, int]:
    """Where the value at `path` starts (1-based); the document's start when it cannot be found."""
    if parsed.kind == "yaml":
        node = parsed.nodes[document]
        for part in path:
            found = yaml_entry(node, part)
            if found is None:
                break
            node = found[1]
        return node.start_mark.line + 1, node.start_mark.column + 1
    if parsed.kind == "json":
        offset = _json_offset(parsed.text, path)
        if offset is not None:
            before = parsed.text[:offset]
            return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1
    return 1, 1


def _json_offset(text: str, path: Sequence[Any]) -> int | None:
    """The offset of the value at `path` in JSON `text` (None when not found)."""
    decoder = json.JSONDecoder()
    try:
        at = _skip(text, 0)
        for part in path:
            found = next((start for key, start in _members(decoder, text, at) if key == part), None)
            if found is None:
                return None
            at = found
    except (ValueError, IndexError):
        return None
    return at


def _members(decoder: json.JSONDecoder, text: str, at: int) -> Iterator[tuple[Any, int]]:
    """(key or index, offset of its value) of the object or array starting at `at`."""
    opening = text[at]
    if opening not in "{[":
        return
    closing = "}" if opening == "{" else "]"
    at = _skip(text, at + 1)
    index = 0
    while text[at] != closing:
        if opening == "{":
            key, at = json.decoder.scanstring(text, at + 1)  # type: ignore[attr-defined]
            at = _skip(text, _skip(text, at) + 1)  # past the colon
        else:
            key, index = index, index + 1
        yield key, at
        _, at = decoder.raw_decode(text, at)
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WS:
        at += 1
    return at
