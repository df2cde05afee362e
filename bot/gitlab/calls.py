"""Typed single calls through python-gitlab's HTTP layer, each translated into our errors.

Every helper makes one HTTP request (`get_list`: one per page, bounded), with the client's
timeout, and returns plain JSON; a read GitLab answered with a 5xx is sent once more at once
(READ_RETRIES). `Any` stops here: the operations parse what they use.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any, TypeVar

import gitlab

from bot.gitlab.errors import GitLabUnavailable, translating

#: Page size for lists (GitLab's maximum).
PER_PAGE = 100
#: The most items any list read returns: keeps every operation's number of calls bounded.
MAX_ITEMS = 2000
#: A read answered 5xx is sent again at once, this many times. Such answers are mostly one
#: proxy's or one Puma worker's blip, and a step of several reads otherwise needs every one of
#: them to succeed in the same attempt (at 30 % of calls failing, a step of six reads succeeds
#: one attempt in nine). Never a write (the next attempt re-reads instead), never a 429 (its
#: Retry-After is honoured by the scheduled retry) nor a timeout (it already took the timeout).
READ_RETRIES = 1

T = TypeVar("T")


def _read(what: str, call: Callable[[], T]) -> T:
    """Runs one read, sending it again at once after a 5xx answer (READ_RETRIES times)."""
    for attempt in range(READ_RETRIES + 1):
        try:
            with translating(what):
                return call()
        except GitLabUnavailable as exc:
            blip = type(exc) is GitLabUnavailable and (exc.status_code or 0) >= 500
            if not blip or attempt == READ_RETRIES:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def get_any(gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None) -> Any:
    """GET `path` and return its JSON, whatever its shape."""
    result = _read(what, lambda: gl.http_get(path, query_data=query or {}))
    if not isinstance(result, dict | list):
        raise GitLabUnavailable(f"{what}: GitLab answered something other than JSON")
    return result


def get_json(
    gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None
) -> dict[str, Any]:
    """GET `path` and return its JSON object."""
    result = get_any(gl, path, what=what, query=query)
    if not isinstance(result, dict):
        raise GitLabUnavailable(f"{what}: GitLab answered a list where an object was expected")
    return result


def get_list(
    gl: gitlab.Gitlab,
    path: str,
    *,
    what: str,
    query: dict[str, Any] | None = None,
    limit: int = MAX_ITEMS,
) -> list[dict[str, Any]]:
    """GET every page of `path` (following GitLab's links) up to `limit` items."""
    params = {"per_page": min(PER_PAGE, limit), **(query or {})}
    items = _read(
        what, lambda: list(islice(gl.http_list(path, query_data=params, iterator=True), limit))
    )
    return [item for item in items if isinstance(item, dict)]


def head(gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None) -> None:
    """HEAD `path`: returns when it exists (raises NotFound when it does not)."""
    _read(what, lambda: gl.http_head(path, query_data=query or {}))


def get_raw(
    gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None
) -> bytes:
    """GET `path` and return the body's bytes (a raw file)."""
    result = _read(what, lambda: gl.http_get(path, query_data=query or {}, raw=True))
    content = getattr(result, "content", result)
    if isinstance(content, str):
        return content.encode("utf-8")
    if not isinstance(content, bytes):
        raise GitLabUnavailable(f"{what}: GitLab answered no bytes")
    return content


def head_headers(
    gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None
) -> dict[str, str]:
    """HEAD `path` and return its headers (raises NotFound when it does not exist)."""
    headers = _read(what, lambda: gl.http_head(path, query_data=query or {}))
    return {str(k).lower(): str(v) for k, v in headers.items()}


def post_json(gl: gitlab.Gitlab, path: str, *, what: str, data: dict[str, Any]) -> dict[str, Any]:
    """POST JSON `data` to `path` and return the JSON object GitLab answers ({} when none)."""
    with translating(what, mutating=True):
        result = gl.http_post(path, post_data=data)
    return result if isinstance(result, dict) else {}


def post_answer(
    gl: gitlab.Gitlab, path: str, *, what: str, data: dict[str, Any]
) -> tuple[int, Any]:
    """POST JSON `data` to `path`: GitLab's status code (a 2xx) and its parsed JSON, whatever
    its shape (None when there is none), for the calls whose answer tells by its code alone."""
    with translating(what, mutating=True):
        response = gl.http_request("post", path, post_data=data)
    try:
        body = response.json()
    except ValueError:
        body = None
    return response.status_code, body


def put_json(gl: gitlab.Gitlab, path: str, *, what: str, data: dict[str, Any]) -> dict[str, Any]:
    """PUT JSON `data` to `path` and return the JSON object GitLab answers ({} when none)."""
    with translating(what, mutating=True):
        result = gl.http_put(path, post_data=data)
    return result if isinstance(result, dict) else {}


def delete(gl: gitlab.Gitlab, path: str, *, what: str) -> None:
    """DELETE `path`."""
    with translating(what, mutating=True):
        gl.http_delete(path)
