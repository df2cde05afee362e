"""Parsing `.gitops/bot.yml` with positions: every problem names the file, line and column.

YAML is read with safe-load semantics and less: no tags beyond the core ones, no anchors or
aliases (a billion-laughs file is refused before it grows), at most MAX_POLICY_BYTES, and no
deeper than MAX_POLICY_DEPTH mappings and sequences (counted while composing, so a deeply nested
file under the size limit is a problem at the node that goes too deep, never a RecursionError). A
schema violation is mapped from pydantic's `loc` to the YAML node it concerns.
"""

from __future__ import annotations

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
    """A policy file that cannot be used; `problems` names each (the first is also on self)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems
        first = problems[0]
        self.file, self.line, self.column, self.message = (
            first.file,
            first.line,
            first.column,
            first.message,
        )


class DepthLimitedLoader(yaml.SafeLoader):
    """SafeLoader refusing, while composing, a mapping or sequence nested deeper than
    `max_depth` (PyYAML composes recursively: without this a deep file raises RecursionError).
    The refusal is a ComposerError at the start of the node that goes too deep. Aliases are
    not followed here: a loader that allows them bounds what they expand to itself."""

    max_depth = MAX_POLICY_DEPTH
    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
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


def parse_policy(text: str | bytes, filename: str = POLICY_PATH) -> Policy:
    """The policy the file states, or PolicyError naming file:line:col for each problem."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError([Problem(filename, 1, 1, f"larger than {MAX_POLICY_BYTES} bytes")])
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError([Problem(filename, 1, 1, f"not UTF-8 ({exc.reason})")]) from None
    try:
        loader = _NoAliasLoader(source)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = exc.problem or exc.context or "invalid YAML"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise PolicyError([Problem(filename, line, column, message)]) from None
    except yaml.YAMLError as exc:
        raise PolicyError([Problem(filename, 1, 1, str(exc))]) from None
    except RecursionError:  # not expected past the depth limit; still a problem, never a 500
        raise PolicyError([Problem(filename, 1, 1, "nested too deeply")]) from None
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
