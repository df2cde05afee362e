"""Parsing `.gitops/bot.yml` with positions: every problem names the file, line and column.

The file is the repository's, written by people with Developer access: whatever it holds,
`parse_policy` returns a Policy or raises PolicyError, never anything else (an API request that
reads it answers 422 `policy_invalid`, never 500).

YAML is read with safe-load semantics and less: no tags beyond the core ones, no anchors or
aliases (a billion-laughs file is refused before it grows), at most MAX_POLICY_BYTES, and no
deeper than MAX_POLICY_DEPTH mappings and sequences (counted while composing, so a deeply nested
file under the size limit is a problem at the node that goes too deep, never a RecursionError).
A value the safe constructors cannot make -- an invalid date (`2023-02-30`), an integer past
Python's 4,300 digits, a sexagesimal float past a float's range, a `!!bool` that is none -- is a
problem at its node (PyYAML raises ValueError, OverflowError or KeyError there), and so is a
string holding a lone surrogate (`"\\ud800"`), which no database or JSON encoder takes. Reading
stops after MAX_POLICY_SECONDS (asked at every node composed; `DepthLimitedLoader.out_of_time`).
A schema violation is mapped from pydantic's `loc` to the YAML node it concerns.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from bot.policy.model import POLICY_PATH, Policy

#: The largest policy file read.
MAX_POLICY_BYTES = 64 * 1024
#: The deepest the file's mappings and sequences may nest (the schema's own deepest value,
#: `poll.pipeline_tiers[0][0]`, is 3 deep). The same bound as a webhook body's
#: (bot/ingress/jsonload.py MAX_DEPTH), which this layer may not import.
MAX_POLICY_DEPTH = 32
#: The most seconds reading the file takes (it is small and alias-free: milliseconds).
MAX_POLICY_SECONDS = 2.0
#: The longest problem message.
MAX_MESSAGE = 300

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem of a policy file, at a 1-based line and column."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class PolicyError(ValueError):
    """A policy file that cannot be used; `problems` names each (the first is also on self).
    A message longer than MAX_MESSAGE is cut (YAML's may quote a tag of kilobytes)."""

    def __init__(self, problems: list[Problem]) -> None:
        problems = [
            p
            if len(p.message) <= MAX_MESSAGE
            else Problem(p.file, p.line, p.column, p.message[: MAX_MESSAGE - 1] + "…")
            for p in problems
        ]
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems
        first = problems[0]
        self.file, self.line, self.column, self.message = (
            first.file,
            first.line,
            first.column,
            first.message,
        )


def _in_time() -> str | None:
    return None


class DepthLimitedLoader(yaml.SafeLoader):
    """SafeLoader refusing, while composing, a mapping or sequence nested deeper than
    `max_depth` (PyYAML composes recursively: without this a deep file raises RecursionError).
    The refusal is a ComposerError at the start of the node that goes too deep. Aliases are
    not followed here: a loader that allows them bounds what they expand to itself.

    Before each node is composed it asks `out_of_time` (the caller's budget: the words saying
    it is spent, or None), and stops with a ComposerError there when it is spent. A value the
    safe constructors cannot make, or a string holding a lone surrogate, is a ConstructorError
    at its node, never the ValueError, OverflowError or KeyError they raise."""

    max_depth = MAX_POLICY_DEPTH
    _depth = 0
    out_of_time: Callable[[], str | None] = staticmethod(_in_time)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        spent = self.out_of_time()
        if spent is not None:
            raise yaml.composer.ComposerError(None, None, spent, event.start_mark)
        container = isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent)
        if container:
            if self._depth >= self.max_depth:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {self.max_depth} levels", event.start_mark
                )
            self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            if container:
                self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            value = super().construct_object(node, deep=deep)
        except (yaml.YAMLError, RecursionError):
            raise
        except (ValueError, ArithmeticError, LookupError, TypeError, AttributeError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, cannot_construct(node, exc), node.start_mark
            ) from None
        if isinstance(value, str) and _SURROGATE.search(value):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a string holding a lone surrogate, which is no character",
                node.start_mark,
            )
        return value


def cannot_construct(node: yaml.Node, exc: Exception) -> str:
    """Why the safe constructors could not make a value of `node` (what they raised)."""
    kind = str(node.tag).rsplit(":", 1)[-1]
    if isinstance(exc, ValueError) and "Exceeds the limit" in str(exc):
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    if isinstance(exc, OverflowError):
        return f"a number too large to read ({kind})"
    if isinstance(exc, ValueError):
        return f"not a valid {kind}: {str(exc)[:100]}"
    return f"not a valid {kind}"


def reader_problem(exc: yaml.reader.ReaderError, text: str) -> tuple[int, int, str]:
    """The 1-based line and column of the character a ReaderError is about, and what it is."""
    line, column = _line_column(text, exc.position)
    character = exc.character
    what = f"#x{character:04x}" if isinstance(character, int) else repr(character)
    return line, column, f"unacceptable character {what}: special characters are not allowed"


class _NoAliasLoader(DepthLimitedLoader):
    """The policy file's loader: no anchors or aliases, at most MAX_POLICY_DEPTH deep."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent) or anchor is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases are not allowed in a policy file", event.start_mark
            )
        return super().compose_node(parent, index)


def parse_policy(
    text: str | bytes, filename: str = POLICY_PATH, *, seconds: float = MAX_POLICY_SECONDS
) -> Policy:
    """The policy the file states, or PolicyError naming file:line:col for each problem (for
    any text or bytes: nothing else is raised). Reading stops after `seconds`."""
    source = _source(text, filename)
    node, data = _compose(source, filename, seconds)
    if data is None:
        data = {}  # an empty file: the defaults
    if not isinstance(data, dict):
        raise PolicyError([Problem(filename, *yaml_position(node, ()), "expected a mapping")])
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        problems = [
            Problem(
                filename,
                *yaml_position(node, tuple(err["loc"]), at_key=err["type"] == "extra_forbidden"),
                _message(err),
            )
            for err in exc.errors(include_url=False)
        ]
        raise PolicyError(problems) from None
    except (ValueError, ArithmeticError, TypeError) as exc:  # a value no validator expected
        message = f"cannot be read ({type(exc).__name__})"
        raise PolicyError([Problem(filename, 1, 1, message)]) from None


def _source(text: str | bytes, filename: str) -> str:
    """The file as text within MAX_POLICY_BYTES, or PolicyError."""
    if isinstance(text, str):
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            line, column = _line_column(text, exc.start)
            raise PolicyError(
                [Problem(filename, line, column, "not UTF-8 (a lone surrogate)")]
            ) from None
    else:
        raw = text
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError([Problem(filename, 1, 1, f"larger than {MAX_POLICY_BYTES} bytes")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError([Problem(filename, 1, 1, f"not UTF-8 ({exc.reason})")]) from None


def _compose(source: str, filename: str, seconds: float) -> tuple[yaml.Node | None, Any]:
    """The file's one document, composed and constructed, or PolicyError at its position."""
    ends = time.monotonic() + seconds

    def out_of_time() -> str | None:
        spent = time.monotonic() > ends
        return f"reading the file took more than {seconds:g} s" if spent else None

    try:
        loader = _NoAliasLoader(source)
        loader.out_of_time = out_of_time
        try:
            node = loader.get_single_node()
            return node, (loader.construct_document(node) if node is not None else None)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = exc.problem or exc.context or "invalid YAML"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise PolicyError([Problem(filename, line, column, message)]) from None
    except yaml.reader.ReaderError as exc:
        raise PolicyError([Problem(filename, *reader_problem(exc, source))]) from None
    except yaml.YAMLError as exc:
        raise PolicyError([Problem(filename, 1, 1, str(exc).splitlines()[0])]) from None
    except RecursionError:  # not expected past the depth limit; still a problem, never a 500
        raise PolicyError([Problem(filename, 1, 1, "nested too deeply")]) from None
    except (ValueError, ArithmeticError, LookupError, TypeError, AttributeError) as exc:
        # raised by a safe constructor outside any one node (a merge of what is no mapping)
        raise PolicyError(
            [Problem(filename, 1, 1, f"not valid YAML ({type(exc).__name__})")]
        ) from None


def _line_column(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _message(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def yaml_position(
    node: yaml.Node | None, loc: tuple[Any, ...], *, at_key: bool = False
) -> tuple[int, int]:
    """The 1-based line and column of the deepest YAML node `loc` reaches (for an unknown key,
    the key itself)."""
    if node is None:
        return 1, 1
    current = node
    for part in loc:
        found = yaml_entry(current, part)
        if found is None:
            break
        key, value = found
        current = key if at_key and part == loc[-1] else value
    mark = current.start_mark
    return mark.line + 1, mark.column + 1


def yaml_entry(node: yaml.Node, part: Any) -> tuple[yaml.Node, yaml.Node] | None:
    """The (key, value) nodes under a composed YAML `node` that one step of a path names (a
    mapping key, or a sequence index: the item is then both); None when there is none."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key, value
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        items: list[yaml.Node] = node.value
        if 0 <= part < len(items):
            return items[part], items[part]
    return None
