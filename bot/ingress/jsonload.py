"""Loading untrusted JSON bodies with limits, into a dict or a clear reason why not."""

from __future__ import annotations

import json
from typing import Any

#: Deeper nesting than this is refused before parsing (GitLab's payloads are about 4 deep).
MAX_DEPTH = 32


class Unusable(ValueError):
    """The body cannot be used; the message is the reason stored with the quarantined delivery."""


def _too_deep(text: str, limit: int) -> bool:
    """True when brackets nest deeper than `limit` (strings are skipped)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise Unusable(f"not JSON: {name} is not allowed")


def load_object(body: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The body as a JSON object; raises Unusable with a short reason for anything else."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unusable(f"not UTF-8 at byte {exc.start}") from None
    if _too_deep(text, max_depth):
        raise Unusable(f"JSON nested deeper than {max_depth}")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise Unusable(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise Unusable("JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
        raise Unusable(f"not JSON: {exc}"[:200]) from None
    if not isinstance(value, dict):
        raise Unusable(f"expected a JSON object, got {type(value).__name__}")
    return value
