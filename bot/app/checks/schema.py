"""A parsed file against a JSON Schema (the `jsonschema` library), each error at the line and
column of the value it is about: the YAML node's start, or the JSON value's first character.

Only the schema itself is read: a `$ref` to anything outside it is not fetched (jsonschema's
registry retrieves nothing by default), it is a problem naming the reference; a `$ref` that
leads back to itself is a problem too, not a RecursionError.

The schema is the repository's, and Python's `re`, which jsonschema matches `pattern` and
`patternProperties` with, backtracks: a pattern such as `^(a+)+$` takes exponential time, and
even `\\d*\\d*x` takes seconds on a thousand digits. Two bounds (no regex engine without
backtracking is a dependency of the bot): no pattern sees a string or key longer than
MAX_PATTERN_INPUT characters (a longer one is a problem, never passed unmatched), and a change's
schema checks stop after MAX_SCHEMA_SECONDS, which is then a problem naming the file (on the
main thread, where the RQ worker runs its jobs and Python delivers SIGALRM; the embedded
server's threads have only the first bound).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import jsonschema
import referencing.exceptions

from bot.policy.parse import yaml_entry

if TYPE_CHECKING:
    from bot.app.checks.syntax import Parsed

#: The most schema errors reported for one file.
MAX_ERRORS = 10
#: The longest string, value or key, a schema's patterns are matched against.
MAX_PATTERN_INPUT = 1000
#: The most seconds the schema checks of one change take (where a timer can stop them).
MAX_SCHEMA_SECONDS = 10.0

_WS = " \t\r\n"
_Keyword = Callable[..., Iterator[jsonschema.ValidationError]]


def schema_deadline() -> float:
    """When the schema checks of a change starting now must end (time.monotonic())."""
    return time.monotonic() + MAX_SCHEMA_SECONDS


def schema_error(schema: Any) -> str | None:
    """What makes `schema` not a JSON Schema (its metaschema's word), or None."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    except RecursionError:  # a schema file is parsed at most syntax.MAX_DEPTH deep
        return "not a valid JSON Schema: nested too deeply"
    return None


def validate_schema(
    schema: Any, parsed: Parsed, deadline: float | None = None
) -> list[tuple[int, int, str]]:
    """(line, column, message) for each way the file's documents break `schema` (checked by
    schema_error first), in the order they appear in the file; one problem instead when the
    schema cannot be followed or the checks pass `deadline` (time.monotonic())."""
    validator = _bounded(jsonschema.validators.validator_for(schema))(schema)
    found: list[tuple[int, int, str]] = []
    seconds = MAX_SCHEMA_SECONDS if deadline is None else deadline - time.monotonic()
    if seconds <= 0:
        return [(1, 1, f"not checked: the change's schema checks took {MAX_SCHEMA_SECONDS:g} s")]
    try:
        with _time_limit(seconds):
            for index, document in enumerate(parsed.documents):
                errors = [
                    (*_position(parsed, index, list(error.absolute_path)), _message(error))
                    for error in validator.iter_errors(document)
                ]
                found.extend(sorted(errors))
                if len(found) >= MAX_ERRORS:
                    return found[:MAX_ERRORS]
    except referencing.exceptions.Unresolvable as exc:
        return [(1, 1, f"the schema refers to what it does not hold: {exc}")]
    except RecursionError:  # documents are at most syntax.MAX_DEPTH deep: the schema loops
        return [(1, 1, "the schema refers to itself without end (a $ref cycle)")]
    except _OutOfTime:
        return [
            (
                1,
                1,
                f"not checked: the change's schema checks took {MAX_SCHEMA_SECONDS:g} s "
                "(a pattern that backtracks?)",
            )
        ]
    return found


@cache
def _bounded(base: type[jsonschema.protocols.Validator]) -> type[jsonschema.protocols.Validator]:
    """`base` with its pattern keywords refusing inputs longer than MAX_PATTERN_INPUT (and
    keys that are not strings, which YAML allows and `re` cannot match)."""
    keywords: dict[str, _Keyword] = dict(base.VALIDATORS)
    changed: dict[str, _Keyword] = {}
    if "pattern" in keywords:
        changed["pattern"] = _bounded_value(keywords["pattern"])
    for name in ("patternProperties", "additionalProperties", "unevaluatedProperties"):
        if name in keywords:
            changed[name] = _bounded_keys(name, keywords[name])
    bounded: type[jsonschema.protocols.Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, changed
    )
    return bounded


def _bounded_value(pattern: _Keyword) -> _Keyword:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and len(instance) > MAX_PATTERN_INPUT:
            yield jsonschema.ValidationError(
                f"{len(instance)} characters, more than the {MAX_PATTERN_INPUT} "
                f"a pattern is matched against"
            )
            return
        yield from pattern(validator, value, instance, schema)

    return keyword


def _bounded_keys(name: str, original: _Keyword) -> _Keyword:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        matched = name != "additionalProperties" or "patternProperties" in schema
        if matched and validator.is_type(instance, "object"):
            for key in instance:
                if not isinstance(key, str):
                    yield jsonschema.ValidationError(
                        f"the key {key!r} is not a string, which a pattern is matched against"
                    )
                    return
                if len(key) > MAX_PATTERN_INPUT:
                    yield jsonschema.ValidationError(
                        f"a key of {len(key)} characters, more than the {MAX_PATTERN_INPUT} "
                        f"a pattern is matched against"
                    )
                    return
        yield from original(validator, value, instance, schema)

    return keyword


class _OutOfTime(BaseException):
    """The timer ran out in the schema checks (a BaseException: no `except Exception` in a
    library swallows it)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raises _OutOfTime in the block once `seconds` have passed: a SIGALRM timer, which `re`
    answers while it matches. Only on the main thread (elsewhere Python cannot take the signal:
    the block runs unbounded). The process's own timer (RQ's job timeout uses SIGALRM too) is
    kept: its handler runs if it comes first, and it is set again with the time it had left."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outer_handler = signal.getsignal(signal.SIGALRM)
    outer_left, outer_interval = signal.setitimer(signal.ITIMER_REAL, 0)
    outer_first = 0 < outer_left <= seconds
    started, active = time.monotonic(), [True]

    def on_alarm(signum: int, frame: Any) -> None:
        if not active[0]:
            return
        if outer_first and callable(outer_handler):
            outer_handler(signum, frame)
        raise _OutOfTime

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, outer_left if outer_first else seconds)
    try:
        yield
    finally:
        active[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if outer_handler is None else outer_handler)
        if outer_left > 0:
            left = outer_left - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), outer_interval)


def _message(error: jsonschema.ValidationError) -> str:
    pointer = "/" + "/".join(
        str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_path
    )
    message = error.message if len(error.message) <= 200 else error.message[:199] + "…"
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
