"""The GitLab adapter's errors, and the one translation of python-gitlab/requests failures.

Every error carries the real HTTP `status_code` (None when no answer arrived). Transient ones are
`bot.errors.TransientError` (the caller schedules a retry, no sooner than `retry_after`);
deterministic ones are `bot.errors.CannotProceed`. `UnknownOutcome` means a write was sent and no
answer came back: it may have happened, so re-read remote state before trying again (every
operation in this package does that on its own). Messages are scrubbed of tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import gitlab.exceptions
import requests

from bot.errors import CannotProceed, GitopsError, TransientError

#: Longest excerpt of GitLab's own message kept in an error (the rest is noise in a status line).
_DETAIL_LIMIT = 300
#: GitLab token shapes (personal, project, group, deploy, trigger, runner... all "gl<kind>-").
_TOKEN_SHAPE = re.compile(r"\bgl[a-z]{1,8}-[A-Za-z0-9_.\-]{8,}")
#: Secrets this process knows (tokens, hook secrets); masked in every error message.
_SECRETS: set[str] = set()


def register_secret(secret: str) -> None:
    """Remembers a secret so that no error message ever shows it (short values are ignored)."""
    if len(secret) >= 6:
        _SECRETS.add(secret)


def scrub(text: str) -> str:
    """Masks every registered secret and anything shaped like a GitLab token."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "[masked]")
    return _TOKEN_SHAPE.sub("[masked]", text)


class GitLabError(GitopsError):
    """Base of the adapter's errors: a scrubbed message and GitLab's HTTP status (or None)."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(scrub(message))
        #: the HTTP status GitLab answered, or None when no answer arrived
        self.status_code = status_code


class GitLabUnavailable(GitLabError, TransientError):
    """GitLab cannot answer now (5xx, 408, 429, no connection, a timeout on a read): retry later."""

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        #: seconds GitLab asked us to wait (Retry-After), or None when it did not say
        self.retry_after = retry_after


class RateLimited(GitLabUnavailable):
    """429: never retry before `retry_after` (None: the header was missing; use the backoff)."""


class UnknownOutcome(GitLabUnavailable):
    """A write timed out after it was sent: it may have happened; re-read before retrying."""


class GitLabRefused(GitLabError, CannotProceed):
    """GitLab answered a deterministic refusal (a 3xx/4xx other than 408/429)."""

    def __init__(
        self, message: str, *, status_code: int | None = None, body: Any | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        #: the parsed JSON body of the refusal (None when absent or not JSON)
        self.body = body


class NotModified(GitLabRefused):
    """304: nothing changed (newer GitLab answers a repeat approve this way)."""


class Unauthorized(GitLabRefused):
    """401: a bad token, or not allowed (older GitLab also answers a repeat approve this way)."""


class Forbidden(GitLabRefused):
    """403: the account may not do this."""


class NotFound(GitLabRefused):
    """404: no such project, MR, branch, file or note (or not visible to this account)."""


class GitLabConflict(GitLabRefused):
    """409: the `sha` given is not the head any more (approve, merge), or the object exists."""


class Unprocessable(GitLabRefused):
    """422: GitLab understood the request and refuses it (its body says why)."""


class BranchNotOurs(GitLabRefused):
    """The change's branch exists without our `Change-Request` trailer: never overwritten."""


class MrClosed(GitLabRefused):
    """The MR is closed: it cannot be merged (re-open it, or re-apply the change)."""


_BY_STATUS: Mapping[int, type[GitLabRefused]] = {
    304: NotModified,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: GitLabConflict,
    422: Unprocessable,
}


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Reads Retry-After (seconds or an HTTP date) as seconds to wait; None when absent or odd."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _parse_body(body: bytes | str | None) -> Any | None:
    if not body:
        return None
    try:
        return json.loads(body)
    except (TypeError, ValueError, UnicodeDecodeError):
        return None


def error_for_status(
    what: str,
    status: int | None,
    detail: str = "",
    *,
    body: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> GitLabError:
    """Builds the error for GitLab's answer `status` to the call `what` (not raised here)."""
    detail = " ".join(str(detail).split())[:_DETAIL_LIMIT]
    message = f"{what}: GitLab answered {status}" + (f": {detail}" if detail else "")
    if status is None or status >= 500 or status == 408:
        return GitLabUnavailable(message, status_code=status)
    if status == 429:
        retry_after = parse_retry_after((headers or {}).get("Retry-After"))
        return RateLimited(message, status_code=status, retry_after=retry_after)
    cls = _BY_STATUS.get(status, GitLabRefused)
    return cls(message, status_code=status, body=_parse_body(body))


def raise_for_response(what: str, response: requests.Response) -> None:
    """Raises the error for a non-2xx `response` to a call made without python-gitlab."""
    if 200 <= response.status_code < 300:
        return
    body = response.content
    parsed = _parse_body(body)
    detail = ""
    if isinstance(parsed, dict):
        detail = str(parsed.get("message") or parsed.get("error") or "")
    raise error_for_status(
        what, response.status_code, detail, body=body, headers=response.headers
    ) from None


@contextmanager
def translating(what: str, *, mutating: bool = False) -> Iterator[None]:
    """Turns python-gitlab and requests failures inside the block into this module's errors.

    `mutating`: the call changes remote state, so a timeout after sending is `UnknownOutcome`.
    The original exception is not chained (its text may carry a response body).
    """
    try:
        yield
    except GitLabError:
        raise
    except requests.exceptions.ConnectTimeout:
        # never reached GitLab: safe to retry as is
        raise GitLabUnavailable(f"{what}: timed out connecting to GitLab") from None
    except requests.exceptions.Timeout:
        if mutating:
            raise UnknownOutcome(f"{what}: timed out waiting for GitLab's answer") from None
        raise GitLabUnavailable(f"{what}: timed out waiting for GitLab's answer") from None
    except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError):
        # the answer was on its way, so the write reached GitLab
        if mutating:
            raise UnknownOutcome(f"{what}: GitLab's answer was cut off") from None
        raise GitLabUnavailable(f"{what}: GitLab's answer was cut off") from None
    except requests.exceptions.RequestException as exc:
        raise GitLabUnavailable(f"{what}: no connection to GitLab ({type(exc).__name__})") from None
    except gitlab.exceptions.RedirectError:
        # a redirect on a write (http -> https, a moved instance): configuration, not luck
        raise GitLabRefused(
            f"{what}: GitLab redirected the call; check GITOPS_GITLAB_URL"
        ) from None
    except gitlab.exceptions.GitlabError as exc:
        raise error_for_status(
            what, exc.response_code, str(exc.error_message), body=exc.response_body
        ) from None
