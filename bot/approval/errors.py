"""The approval adapter's errors: each is a TransientError, a CannotProceed or a webhook refusal.

They carry what the caller decides on (status code, Retry-After, a short detail) and never a
secret or a whole response body. Catch the bot-wide bases (`TransientError`, `CannotProceed`)
unless the difference between the subclasses matters to you.
"""

from __future__ import annotations

from enum import StrEnum

from bot.errors import CannotProceed, GitopsError, TransientError


class ApprovalUnavailable(TransientError):
    """The approval system cannot answer now (5xx, 408, 425, 429, no connection): retry later."""

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        #: the HTTP status, or None when no answer arrived (connection error, timeout)
        self.status_code = status_code
        #: seconds the approval system asked us to wait (Retry-After), when it said so
        self.retry_after = retry_after


class ApprovalOutcomeUnknown(ApprovalUnavailable):
    """A write was sent but no answer came back: it may have happened; re-sending it is safe."""


class ApprovalCallFailed(CannotProceed):
    """The call cannot succeed as sent (a 4xx, a redirect, an unreadable answer, no URL set)."""

    def __init__(self, message: str, *, status_code: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        #: the HTTP status, or None when the call never reached the approval system
        self.status_code = status_code
        #: a short, capped excerpt of what the approval system said (or why we refused the answer)
        self.detail = detail


class ApprovalNotFound(ApprovalCallFailed):
    """The approval system does not know this approval id (a status call answered 404)."""


class SignatureFault(StrEnum):
    """Why a callback's signature was refused (logged and counted; the sender only sees 401)."""

    UNCONFIGURED = "unconfigured"  # GITOPS_APPROVAL_SECRET is empty: nothing can be verified
    MISSING = "missing"  # no timestamp or no signature header
    MALFORMED = "malformed"  # not "<digits>" and "sha256=<64 hex digits>"
    STALE = "stale"  # the timestamp is outside the replay window (either direction)
    MISMATCH = "mismatch"  # well-formed, fresh, and wrong


class SignatureRejected(GitopsError):
    """An approval callback failed authentication (answer 401)."""

    def __init__(self, reason: SignatureFault | str) -> None:
        super().__init__(reason)  # args stay (reason,) so the error pickles and unpickles whole
        self.reason = SignatureFault(reason)

    def __str__(self) -> str:
        return f"approval callback signature rejected: {self.reason}"


class MalformedCallback(GitopsError):
    """An authenticated approval callback is unusable (answer 2xx and quarantine it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        #: short and safe to store as the quarantine reason (field names, never whole values)
        self.reason = reason

    def __str__(self) -> str:
        return f"malformed approval callback: {self.reason}"
