"""Loading untrusted JSON bodies with limits, into a dict or a clear reason why not."""

from __future__ import annotations

import json
from typing import Any

#: Deeper nesting than this is refused before parsing (GitLab's payloads are about 4 deep).
MAX_DEPTH = 32


class Unusable(ValueError):
    """The body cannot be used; the message is the reason stored with the quarantined delivery."""


def depth(value: Any) -> int:
    """How deep objects and arrays nest (iteratively, so hostile input cannot recurse)."""
    containers = (dict, list)
    if type(value) not in containers:
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        for child in item.values() if type(item) is dict else item:
            if type(child) in containers:
                stack.append((child, level + 1))
    return deepest


def _reject_constant(name: str) -> Any:
    raise Unusable(f"not JSON: {name} is not allowed")


def load_object(body: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The body as a JSON object; raises Unusable with a short reason for anything else."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unusable(f"not UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise Unusable(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise Unusable(f"JSON nested deeper than {max_depth}") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
        raise Unusable(f"not JSON: {exc}"[:200]) from None
    if not isinstance(value, dict):
        raise Unusable(f"expected a JSON object, got {type(value).__name__}")
    # the C parser is fast and bounded by the body size limit; the depth is checked after it
    if depth(value) > max_depth:
        raise Unusable(f"JSON nested deeper than {max_depth}")
    return value
