"""The one error the double raises: an HTTP answer GitLab would give, with its JSON body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answer: status and GitLab's `message`, plus any extra JSON fields."""

    def __init__(self, status: int, message: Any, **extra: Any) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The JSON body GitLab answers with (`{"message": ...}` plus extras)."""
        body: dict[str, Any] = {} if self.message is None else {"message": self.message}
        return {**body, **self.extra}


def not_found(what: str = "Not found") -> ApiError:
    """GitLab's 404 wording: `404 <what>`."""
    return ApiError(404, f"404 {what}")


def unauthorized() -> ApiError:
    """GitLab's bare 401."""
    return ApiError(401, "401 Unauthorized")


def forbidden() -> ApiError:
    """GitLab's bare 403."""
    return ApiError(403, "403 Forbidden")


def bad_request(message: str) -> ApiError:
    """A 400 with GitLab's free-text message."""
    return ApiError(400, message)
