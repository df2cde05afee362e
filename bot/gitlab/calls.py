"""Typed single calls through python-gitlab's HTTP layer, each translated into our errors.

Every helper makes exactly one HTTP request (`get_list`: one per page, bounded), with the
client's timeout, and returns plain JSON. `Any` stops here: the operations parse what they use.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import gitlab

from bot.gitlab.errors import GitLabUnavailable, translating

#: Page size for lists (GitLab's maximum).
PER_PAGE = 100
#: The most items any list read returns: keeps every operation's number of calls bounded.
MAX_ITEMS = 2000


def get_any(gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None) -> Any:
    """GET `path` and return its JSON, whatever its shape."""
    with translating(what):
        result = gl.http_get(path, query_data=query or {})
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
    with translating(what):
        pages = gl.http_list(path, query_data=params, iterator=True)
        items = list(islice(pages, limit))
    return [item for item in items if isinstance(item, dict)]


def head(gl: gitlab.Gitlab, path: str, *, what: str, query: dict[str, Any] | None = None) -> None:
    """HEAD `path`: returns when it exists (raises NotFound when it does not)."""
    with translating(what):
        gl.http_head(path, query_data=query or {})


def post_json(gl: gitlab.Gitlab, path: str, *, what: str, data: dict[str, Any]) -> dict[str, Any]:
    """POST JSON `data` to `path` and return the JSON object GitLab answers ({} when none)."""
    with translating(what, mutating=True):
        result = gl.http_post(path, post_data=data)
    return result if isinstance(result, dict) else {}


def put_json(gl: gitlab.Gitlab, path: str, *, what: str, data: dict[str, Any]) -> dict[str, Any]:
    """PUT JSON `data` to `path` and return the JSON object GitLab answers ({} when none)."""
    with translating(what, mutating=True):
        result = gl.http_put(path, post_data=data)
    return result if isinstance(result, dict) else {}


def delete(gl: gitlab.Gitlab, path: str, *, what: str) -> None:
    """DELETE `path`."""
    with translating(what, mutating=True):
        gl.http_delete(path)
