"""The REST API's request bodies before their model: read within the limits, strict JSON, and the
hash an idempotency key is bound to; and the API's refusal, ApiError.

What a body must hold is webhooks/api_models.py's; everything here is synchronous and cheap, and a
refusal is an ApiError with the right 4xx.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, NoReturn

from webhooks.ingest import read_body

#: A request body is 3 deep (object, files, file); anything much deeper is not ours.
MAX_JSON_DEPTH = 8
#: Seconds a client is asked to wait after a 503 "overloaded".
RETRY_AFTER_SECONDS = 60
#: An operation id as the routes take it (anything else is a 404 without a look-up).
OPERATION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
OPERATION_ID = re.compile(OPERATION_ID_PATTERN)


class ApiError(Exception):
    """An answer other than success: status, short code, human detail and extra fields."""

    def __init__(self, status: int, error: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.http_status = status
        self.body: dict[str, Any] = {"error": error, "detail": detail, **extra}


def invalid(field: str, detail: str) -> NoReturn:
    raise ApiError(422, "invalid", f"{field}: {detail}", field=field)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("an object has the same key twice")
    return value


def load_body() -> dict[str, Any]:
    """The request body as a JSON object within the nesting limit, or an ApiError.

    The body is read within the size limit (413) and GITOPS_BODY_TIMEOUT (408).
    """
    raw = read_body()
    try:
        body = json.loads(
            raw, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys
        )
    except RecursionError:
        invalid("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, huge integers, NaN, duplicate keys
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        invalid("body", f"must be a JSON object, not {type(body).__name__}")
    if _depth(body) > MAX_JSON_DEPTH:
        invalid("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return body


def _depth(value: Any) -> int:
    """How deep objects and arrays nest (iteratively: no recursion on hostile input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and deepest <= MAX_JSON_DEPTH:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def request_hash(body: dict[str, Any]) -> str:
    """The sha256 of the body's canonical JSON: what an idempotency key is bound to."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
