"""The JSON Schema validators the checks run: jsonschema's, each keyword bounded.

`bounded(base)` is `base` (a draft's validator class) with:

- every keyword asking the running check's deadline first (`OutOfTime` stops it), so an
  exponential `anyOf` or `$ref` tree stops like a long file does;
- `pattern`, `patternProperties`, `additionalProperties` and `unevaluatedProperties` matching
  on RE2 (bot/app/checks/ecma_regex.py) instead of Python's backtracking `re`, asking the
  deadline at every key, and refusing what RE2 cannot run (`PatternRefused`) or a text too long
  for a pattern's bound (a problem where the text stands);
- `uniqueItems` in linear time (jsonschema compares unhashable items pairwise: 100,000 objects
  would take hours), asking the deadline at every item;
- `evolve` keeping to bounded classes: jsonschema switches to its own class of a subschema's
  `$schema` there, which would escape all of the above; and a subschema that is no schema (a
  `$ref` to `#/enum`) is `SchemaUnusable`, not an AttributeError.

`format_checker(base)` checks the formats listed in FORMATS (with jsonschema's checkers and the
libraries pyproject.toml names for them: fqdn, rfc3339-validator, rfc3986-validator, idna) and
`regex` with RE2; a checker that raises what it should not is a failed format, never a crash.
The running check (deadline and compiled patterns) is a context variable: `running(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import attrs
import jsonschema
from jsonschema import ValidationError
from jsonschema.protocols import Validator

from bot.app.checks.budget import Deadline, no_deadline
from bot.app.checks.ecma_regex import Pattern, PatternRefused, Patterns

#: The formats checked (others, like `duration` or `iri`, are annotations, as the spec allows).
FORMATS = (
    "date",
    "date-time",
    "time",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "regex",
    "ip-address",  # draft 3's names
    "host-name",
)

_Keyword = Callable[[Any, Any, Any, Any], Any]


class SchemaUnusable(Exception):
    """The schema cannot be applied; the message says why."""


@dataclass(slots=True)
class Run:
    """What the keywords of a running check share: its deadline and its compiled patterns."""

    deadline: Deadline = field(default_factory=no_deadline)
    patterns: Patterns = field(default_factory=Patterns)


_RUN: ContextVar[Run | None] = ContextVar("gitops_schema_run", default=None)


@contextmanager
def running(run: Run) -> Iterator[Run]:
    """The keywords evaluated in the block belong to `run`."""
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


def current() -> Run:
    """The running check (outside `running`: one with no deadline that keeps nothing)."""
    run = _RUN.get()
    return Run() if run is None else run


@cache
def bounded(base: type[Validator]) -> type[Validator]:
    """`base` with every keyword bounded (see the module's docstring)."""
    own: dict[str, _Keyword] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    if "unevaluatedProperties" in base.VALIDATORS:
        own["unevaluatedProperties"] = _unevaluated_properties
    plain: dict[str, _Keyword] = {**base.VALIDATORS, **own}
    keywords = {name: _timed(keyword) for name, keyword in plain.items()}
    made: Any = jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    init = [(f.name, f.alias) for f in attrs.fields(made) if f.init]

    def evolve(self: Any, **changes: Any) -> Any:
        schema = changes.setdefault("schema", self.schema)
        if not isinstance(schema, dict | bool):
            raise SchemaUnusable(
                f"a reference leads to a {type(schema).__name__}, which is not a schema"
            )
        for name, alias in init:
            changes.setdefault(alias, getattr(self, name))
        return bounded(_dialect(schema, made._base))(**changes)

    made._base = base
    made.evolve = evolve
    result: type[Validator] = made
    return result


def _dialect(schema: Any, default: type[Validator]) -> type[Validator]:
    """The library's class for `schema`'s `$schema` (`default` when it names none we know)."""
    try:
        found: type[Validator] = jsonschema.validators.validator_for(schema, default=default)
    except (TypeError, ValueError, AttributeError):  # a `$schema` that is no URI string
        return default
    return found


def dialect_of(schema: Any) -> type[Validator]:
    """The draft `schema` is written in (the latest when it names none jsonschema knows)."""
    latest: type[Validator] = jsonschema.validators.Draft202012Validator
    return _dialect(schema, latest) if isinstance(schema, dict) else latest


def _timed(keyword: _Keyword) -> _Keyword:
    def timed(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        current().deadline.check()
        return keyword(validator, value, instance, schema)

    return timed


def _matching(pattern: Pattern, key: Any) -> tuple[bool, str | None]:
    """Whether `key` matches `pattern`, or why it cannot be matched (not a string, too long)."""
    if not isinstance(key, str):
        return False, f"the key {key!r} is not a string, which a pattern is matched against"
    too_long = pattern.too_long(key)
    if too_long is not None:
        return False, f"a key of {too_long}"
    return pattern.search(key), None


def _pattern(validator: Any, source: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    pattern = current().patterns.get(source)
    too_long = pattern.too_long(instance)
    if too_long is not None:
        yield ValidationError(too_long)
    elif not pattern.search(instance):
        yield ValidationError(f"{_short(instance)} does not match {source!r}")


def _short(text: str, limit: int = 60) -> str:
    """`text`'s repr, cut in the middle when long (the pattern, after it, must stay readable)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[: limit // 2]}…{shown[-limit // 2 :]}"


def _pattern_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    run = current()
    for source, subschema in value.items():
        pattern = run.patterns.get(source)
        for key, item in instance.items():
            run.deadline.check()
            matched, why = _matching(pattern, key)
            if why is not None:
                yield ValidationError(why)
                return
            if matched:
                yield from validator.descend(item, subschema, path=key, schema_path=source)


def _extras(instance: Mapping[Any, Any], schema: Any) -> tuple[list[Any], str | None]:
    """The keys of `instance` neither `properties` nor `patternProperties` name, or why the
    keys cannot be matched."""
    run = current()
    properties = schema.get("properties", {})
    patterns = [run.patterns.get(source) for source in schema.get("patternProperties", {})]
    extras = []
    for key in instance:
        run.deadline.check()
        if key in properties:
            continue
        for pattern in patterns:
            matched, why = _matching(pattern, key)
            if why is not None:
                return [], why
            if matched:
                break
        else:
            extras.append(key)
    return extras, None


def _additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's `additionalProperties`, its words too, matching on RE2."""
    if not validator.is_type(instance, "object"):
        return
    extras, why = _extras(instance, schema)
    if why is not None:
        yield ValidationError(why)
    elif validator.is_type(value, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], value, path=extra)
    elif not value and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras, key=str))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            extras = sorted(extras, key=str)
            verb = "was" if len(extras) == 1 else "were"
            joined = ", ".join(repr(extra) for extra in extras)
            yield ValidationError(
                f"Additional properties are not allowed ({joined} {verb} unexpected)"
            )


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Any, schema: Any) -> set[Any]:
    """The keys of `instance` that `schema` evaluates (JSON Schema 2020-12 section 11.3,
    jsonschema's reading of it, draft 2019-09's `$recursiveRef` read as a plain `$ref`)."""
    run = current()
    run.deadline.check()
    if not isinstance(schema, dict):
        return set()
    keys: set[Any] = set()
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        if keyword in schema:
            resolved = validator._resolver.lookup(schema[keyword])
            referred = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated_keys(referred, instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys |= {k for k, v in instance.items() if _valid(validator.descend(v, subschema))}
    for source in schema.get("patternProperties", {}):
        pattern = run.patterns.get(source)
        for key in instance:
            run.deadline.check()
            if _matching(pattern, key)[0]:
                keys.add(key)
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(
    validator: Any, value: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    """jsonschema's `unevaluatedProperties`, its words too, matching on RE2."""
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    unevaluated = [
        key
        for key in instance
        if key not in evaluated
        and not _valid(validator.descend(instance[key], value, path=key, schema_path=key))
    ]
    if not unevaluated:
        return
    if value is False:
        unevaluated = sorted(unevaluated, key=str)
        verb = "was" if len(unevaluated) == 1 else "were"
        joined = ", ".join(repr(key) for key in unevaluated)
        yield ValidationError(
            f"Unevaluated properties are not allowed ({joined} {verb} unexpected)"
        )
    else:
        verb = "was" if len(unevaluated) == 1 else "were"
        joined = ", ".join(repr(key) for key in unevaluated)
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({joined} {verb} unevaluated and invalid)"
        )


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal exactly when JSON Schema calls two values
    equal (1 and 1.0 are; true and 1 are not; objects regardless of key order)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or value is None:
        return value  # equal across these kinds only as JSON Schema says (1 == 1.0)
    if kind is bool:
        return (_BOOLEAN, value)
    if kind is list or kind is tuple:
        return (_ARRAY, tuple(_frozen(item) for item in value))
    if kind is dict:
        return (_OBJECT, frozenset((k, _frozen(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:  # e.g. a YAML !!set: never equal to another item
        return (_OTHER, id(value))
    return (_OTHER, value)


_BOOLEAN, _ARRAY, _OBJECT, _OTHER = (object() for _ in range(4))


def _unique_items(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not value or not validator.is_type(instance, "array"):
        return
    run = current()
    seen: set[Any] = set()
    for item in instance:
        run.deadline.check()
        frozen = _frozen(item)
        if frozen in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(frozen)


@cache
def format_checker(base: type[Validator]) -> jsonschema.FormatChecker:
    """The formats of FORMATS that `base`'s draft names, `regex` on RE2, each guarded."""
    drafts: jsonschema.FormatChecker = base.FORMAT_CHECKER
    checker = jsonschema.FormatChecker(formats=())
    for name in FORMATS:
        if name == "regex":
            checker.checkers[name] = (_is_regex, (PatternRefused,))
        elif name in drafts.checkers:
            func, raises = drafts.checkers[name]
            checker.checkers[name] = (_guarded(func, raises), raises)
    return checker


def _guarded(func: Callable[[Any], Any], raises: Any) -> Callable[[Any], bool]:
    def check(instance: Any) -> bool:
        try:
            return bool(func(instance))
        except raises:  # the failure jsonschema reports with its cause
            raise
        except Exception:  # noqa: BLE001 -- a format library's bug fails the value, never the step
            return False

    return check


def _is_regex(instance: Any) -> bool:
    if isinstance(instance, str):
        current().patterns.get(instance)  # PatternRefused says why it is no regex the checks run
    return True


def pattern_refused(error: ValidationError) -> str | None:
    """The words of a `format: regex` failure whose cause is a pattern RE2 cannot run."""
    cause = error.cause
    return str(cause) if isinstance(cause, PatternRefused) else None
