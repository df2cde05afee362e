"""The approval-system client: submit, withdraw and status, each one HTTP call with a timeout.

No retries and no sleeping here: every failure becomes an error the calling job acts on
(`ApprovalUnavailable` and `ApprovalOutcomeUnknown` are retried later, `ApprovalCallFailed`
becomes a failure state). The protocol is described in docs/approval-protocol.md.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import requests
from prometheus_client import Counter
from urllib3.exceptions import NewConnectionError

from bot.approval.decision import Decision
from bot.approval.errors import (
    ApprovalCallFailed,
    ApprovalNotFound,
    ApprovalOutcomeUnknown,
    ApprovalUnavailable,
)
from bot.approval.request import ApprovalRequest
from bot.heartbeat import beat

log = logging.getLogger(__name__)

#: Longest approval id we accept (the operations.approval_id column is 255 wide).
MAX_ID_LENGTH = 255
#: An answer is read up to this many bytes; the approval system's answers are a few hundred.
MAX_RESPONSE_BYTES = 64 * 1024
#: Error details (logs, the status comment) are cut to this many characters.
MAX_DETAIL_CHARS = 200
#: Statuses that mean "not now" on every call (besides 5xx).
RETRY_STATUSES = frozenset({408, 425, 429})
#: Withdraw answers that mean "nothing left to withdraw": already withdrawn, decided or gone.
WITHDRAWN_STATUSES = frozenset({404, 409, 410})
#: Submit's 409 is the Idempotency-Key draft's "a request with this key is still in progress".
SUBMIT_RETRY_STATUSES = RETRY_STATUSES | {409}

_DECISIONS = frozenset(d.value for d in Decision)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_SPACE = re.compile(r"\s+")


CALLS = Counter(
    "gitops_approval_calls_total",
    "Calls to the approval system by call (submit, withdraw, status) and outcome: ok, "
    "unavailable (5xx, 408, 425, 429, no connection), unknown (a write sent and no answer), "
    "refused (a 4xx, a redirect, an unreadable answer, no URL set), not_found (status: 404).",
    ["call", "outcome"],
)


def _outcome(exc: ApprovalCallFailed | ApprovalUnavailable) -> str:
    """The `outcome` label of a call that raised."""
    if isinstance(exc, ApprovalOutcomeUnknown):
        return "unknown"
    if isinstance(exc, ApprovalUnavailable):
        return "unavailable"
    return "not_found" if isinstance(exc, ApprovalNotFound) else "refused"


@contextmanager
def counted(call: str) -> Iterator[None]:
    """Counts one call to the approval system by how it ended (gitops_approval_calls_total)."""
    try:
        yield
    except (ApprovalCallFailed, ApprovalUnavailable) as exc:
        CALLS.labels(call, _outcome(exc)).inc()
        raise
    CALLS.labels(call, "ok").inc()


@dataclass(frozen=True, slots=True)
class _Answer:
    """One HTTP answer: status, headers, and the body (None when it broke off mid-way)."""

    status: int
    headers: Mapping[str, str]
    body: bytes | None


class ApprovalClient:
    """Talks to the approval system at `base_url` (GITOPS_APPROVAL_URL); one call per method."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        base = base_url.strip().rstrip("/")
        parts = urlsplit(base)
        if base and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise ValueError("the approval URL must be an absolute http(s) URL")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self._base = base
        self._timeout = timeout
        self._own_session = session is None
        self._session = session if session is not None else requests.Session()
        # only used to turn an HTTP-date Retry-After into seconds
        self._clock = clock

    def close(self) -> None:
        """Releases the connection pool (only when the client made its own session)."""
        if self._own_session:
            self._session.close()

    def submit(self, request: ApprovalRequest) -> str:
        """Asks for approval and returns the approval id; re-sending the same request is safe."""
        with counted("submit"):
            return self._submit(request)

    def withdraw(self, approval_id: str) -> None:
        """Withdraws the request; one that is already withdrawn, decided or gone counts as done."""
        with counted("withdraw"):
            self._withdraw(approval_id)

    def status(self, approval_id: str) -> Decision:
        """Reads the approval's current decision (reconciliation's view of a lost callback)."""
        with counted("status"):
            return self._status(approval_id)

    def _submit(self, request: ApprovalRequest) -> str:
        answer = self._call(
            "POST",
            "/approvals",
            call="submit",
            payload=request.to_json(),
            headers={"Idempotency-Key": request.operation_id},
            retry=SUBMIT_RETRY_STATUSES,
        )
        data = self._json_object(answer, "submit")
        approval_id = _id(data.get("approval_id"))
        if approval_id is None:
            raise _unreadable("submit", answer.status, "no usable approval_id in the answer")
        log.info(
            "approval submitted",
            extra={"operation_id": request.operation_id, "approval_id": approval_id},
        )
        return approval_id

    def _withdraw(self, approval_id: str) -> None:
        answer = self._call("POST", f"/approvals/{_segment(approval_id)}/withdraw", call="withdraw")
        if answer.status in WITHDRAWN_STATUSES:
            log.info(
                "approval already withdrawn or decided",
                extra={"approval_id": approval_id, "status_code": answer.status},
            )

    def _status(self, approval_id: str) -> Decision:
        answer = self._call("GET", f"/approvals/{_segment(approval_id)}", call="status")
        data = self._json_object(answer, "status")
        echoed = data.get("approval_id")
        if echoed is not None and _id(echoed) != approval_id:
            raise _unreadable("status", answer.status, "the answer is about another approval")
        raw = data.get("decision")
        if isinstance(raw, str) and raw in _DECISIONS:
            return Decision(raw)
        raise _unreadable("status", answer.status, f"unknown decision {_cap(repr(raw), 40)}")

    def _call(
        self,
        method: str,
        path: str,
        *,
        call: str,
        payload: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry: Collection[int] = RETRY_STATUSES,
    ) -> _Answer:
        """Sends one request and sorts the outcome: an answer to use, or the error to raise."""
        if not self._base:
            raise ApprovalCallFailed(
                f"approval system not configured: cannot {call} (GITOPS_APPROVAL_URL is unset)"
            )
        write = method != "GET"
        beat()  # the running step's lease is renewed (or found lost) before the call
        try:
            response = self._session.request(
                method,
                self._base + path,
                json=payload,
                headers={"Accept": "application/json", **(headers or {})},
                timeout=self._timeout,
                allow_redirects=False,
                stream=True,
            )
        except requests.RequestException as exc:
            raise self._transport_error(exc, call, write=write) from exc
        with response:
            answer = _Answer(response.status_code, response.headers, _read_capped(response))

        status = answer.status
        if 200 <= status < 300 or (call == "withdraw" and status in WITHDRAWN_STATUSES):
            return answer
        if status >= 500 or status in retry:
            retry_after = _retry_after(answer.headers.get("Retry-After"), self._clock())
            wait = f", retry after {retry_after:g}s" if retry_after is not None else ""
            raise ApprovalUnavailable(
                f"approval system unavailable: {call} answered HTTP {status}{wait}",
                status_code=status,
                retry_after=retry_after,
            )
        if 300 <= status < 400:
            detail = "redirected; set GITOPS_APPROVAL_URL to the final address"
            raise ApprovalCallFailed(
                f"approval system {call} answered HTTP {status}: {detail}",
                status_code=status,
                detail=detail,
            )
        detail = _detail(answer.body)
        error = ApprovalNotFound if (call == "status" and status == 404) else ApprovalCallFailed
        raise error(
            f"approval system refused {call}: HTTP {status}" + (f": {detail}" if detail else ""),
            status_code=status,
            detail=detail,
        )

    def _transport_error(
        self, exc: requests.RequestException, call: str, *, write: bool
    ) -> ApprovalUnavailable | ApprovalCallFailed:
        """No HTTP answer: unreachable, unknown outcome (a write may have landed), or bad config."""
        kind = type(exc).__name__
        if _never_sent(exc):
            return ApprovalUnavailable(f"approval system unreachable: {call} failed ({kind})")
        if isinstance(exc, requests.Timeout | requests.ConnectionError):
            if write:
                # The request may have been processed: re-sending is safe (Idempotency-Key for
                # submit; withdraw of a withdrawn approval counts as done).
                return ApprovalOutcomeUnknown(
                    f"no answer from the approval system to {call} ({kind}); it may have "
                    "happened, re-sending it is safe"
                )
            return ApprovalUnavailable(f"no answer from the approval system to {call} ({kind})")
        # InvalidURL, InvalidHeader and the like: nothing a retry changes
        return ApprovalCallFailed(f"approval system {call} could not be sent ({kind})")

    def _json_object(self, answer: _Answer, call: str) -> dict[str, Any]:
        """The answer's JSON object, or the error saying why there is none."""
        if answer.body is None:
            message = f"the approval system's answer to {call} broke off"
            if call == "submit":
                raise ApprovalOutcomeUnknown(
                    message + "; it may have happened, re-sending it is safe",
                    status_code=answer.status,
                )
            raise ApprovalUnavailable(message, status_code=answer.status)
        try:
            data = json.loads(answer.body)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            raise _unreadable(call, answer.status, "the answer is not a JSON object")
        return data


def _segment(approval_id: str) -> str:
    """The approval id as one URL path segment (it comes from outside: never let it add a path)."""
    if not approval_id:
        raise ValueError("an approval id is needed")
    return quote(approval_id, safe="")


def _id(value: object) -> str | None:
    """An id as we store it: a non-empty string (integers are accepted and stringified)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_LENGTH:
        return None
    return value


def _read_capped(response: requests.Response) -> bytes | None:
    """Reads at most MAX_RESPONSE_BYTES of the body; None when the connection broke off."""
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_content(chunk_size=8192):
            chunks.append(chunk)
            size += len(chunk)
            if size >= MAX_RESPONSE_BYTES:
                break
    except requests.RequestException:
        return None
    return b"".join(chunks)[:MAX_RESPONSE_BYTES]


def _never_sent(exc: requests.RequestException) -> bool:
    """True when the request cannot have reached the approval system (no connection was made)."""
    if isinstance(exc, requests.ConnectTimeout | requests.exceptions.SSLError):
        return True
    if isinstance(exc, requests.exceptions.ProxyError):
        return True
    cause = exc.args[0] if exc.args else None
    # requests wraps urllib3's MaxRetryError, whose .reason is the real cause
    return isinstance(getattr(cause, "reason", cause), NewConnectionError)


def _retry_after(value: str | None, now: float) -> float | None:
    """Retry-After in seconds from either form (delta-seconds or HTTP-date); None if unusable."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(int(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" means UTC with no zone information (RFC 5322)
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def _detail(body: bytes | None) -> str:
    """A short, single-line excerpt of an error answer: its message field, else its text."""
    if not body:
        return ""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        for key in ("message", "detail", "error", "title"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value.strip():
                text = value
                break
    return _cap(_SPACE.sub(" ", _CONTROL.sub(" ", text)).strip(), MAX_DETAIL_CHARS)


def _cap(text: str, limit: int) -> str:
    """The text, cut to `limit` characters with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unreadable(call: str, status: int, why: str) -> ApprovalCallFailed:
    """A 2xx we cannot use: a contract problem for a person to look at, not worth retrying."""
    return ApprovalCallFailed(
        f"approval system answered {call} with HTTP {status} but {why}",
        status_code=status,
        detail=why,
    )
