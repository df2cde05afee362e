"""A small router over raw (still percent-encoded) paths, and the per-request context.

Raw paths matter: GitLab takes `platform%2Fconfig` as one segment, and so do file paths.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlencode

from .errors import ApiError
from .model import MergeRequest, Project, User

if TYPE_CHECKING:
    from .state import State


@dataclass
class Reply:
    """An answer: status, a JSON-able body (bytes for raw files, None for none), headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Ctx:
    """What a handler sees: the state, the caller, path arguments and merged parameters."""

    state: State
    user: User
    args: dict[str, str]
    params: dict[str, Any]
    url: str
    query: list[tuple[str, str]]

    def project(self) -> Project:
        """The project named in the path; GitLab's 404 for a private one the caller is not a
        member of (it does not say the project exists)."""
        project = self.state.project(self.args["project"])
        if project.visibility == "private" and not self.state.access(project, self.user.id):
            raise ApiError(404, "404 Project Not Found")
        return project

    def mr(self, project: Project) -> MergeRequest:
        """The merge request named in the path."""
        return self.state.mr(project, int(self.args["iid"]))

    def has(self, name: str) -> bool:
        """Whether the caller sent the parameter."""
        return self.params.get(name) is not None

    def require(self, name: str) -> Any:
        """A mandatory parameter; Grape's 400 `<name> is missing` otherwise."""
        if not self.has(name):
            raise ApiError(400, None, error=f"{name} is missing")
        return self.params[name]

    def text(self, name: str, default: str | None = None) -> str | None:
        """An optional string parameter."""
        value = self.params.get(name)
        return default if value is None else str(value)

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean parameter, from JSON or from `true`/`false` strings."""
        value = self.params.get(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        return str(value).lower() in {"true", "1", "yes"}

    def names(self, name: str) -> list[str] | None:
        """A list parameter sent as a list or a comma-separated string (labels)."""
        value = self.params.get(name)
        if value is None:
            return None
        items = value if isinstance(value, list) else str(value).split(",")
        return [str(item).strip() for item in items if str(item).strip()]

    def paginate(self, items: list[Any]) -> Reply:
        """One page of a list, with GitLab's pagination headers and `Link`."""
        per_page = min(max(int(self.params.get("per_page") or 20), 1), 100)
        page = max(int(self.params.get("page") or 1), 1)
        pages = max(math.ceil(len(items) / per_page), 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {
            "X-Page": str(page),
            "X-Per-Page": str(per_page),
            "X-Total": str(len(items)),
            "X-Total-Pages": str(pages),
            "X-Next-Page": str(page + 1) if page < pages else "",
            "X-Prev-Page": str(page - 1) if page > 1 else "",
        }
        rels = {"first": 1, "last": pages}
        if page < pages:
            rels["next"] = page + 1
        if page > 1:
            rels["prev"] = page - 1
        kept = [(k, v) for k, v in self.query if k not in {"page", "per_page"}]
        headers["Link"] = ", ".join(
            f'<{self.url}?{urlencode([*kept, ("page", n), ("per_page", per_page)])}>; rel="{rel}"'
            for rel, n in rels.items()
        )
        return Reply(200, chunk, headers)


Handler = Callable[[Ctx], Reply]


class Router:
    """Routes `(method, raw path)` to handlers; `{name}` is one segment, `{name:int}` digits."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []

    def route(self, method: str, pattern: str) -> Callable[[Handler], Handler]:
        """Registers a handler for a method and a path pattern."""

        def segment(match: re.Match[str]) -> str:
            name, _, kind = match.group(1).partition(":")
            return f"(?P<{name}>\\d+)" if kind == "int" else f"(?P<{name}>[^/]+)"

        regex = re.compile("^" + re.sub(r"\{([^}]+)\}", segment, pattern) + "/?$")

        def register(handler: Handler) -> Handler:
            self._routes.append((method, regex, handler))
            return handler

        return register

    def match(self, method: str, raw_path: str) -> tuple[Handler, dict[str, str]]:
        """The handler and decoded path arguments; GitLab's 404 for unknown routes."""
        # HEAD is answered by the GET route (GitLab does so for files: its headers, no body)
        wanted = {method, "GET"} if method == "HEAD" else {method}
        for route_method, regex, handler in self._routes:
            found = regex.match(raw_path)
            if found and route_method in wanted:
                return handler, {k: unquote(v) for k, v in found.groupdict().items()}
        raise ApiError(404, None, error="404 Not Found")


#: The one router every route module registers on.
router = Router()
