"""Approval callbacks: verify the signature, then read the few fields we use. No IO here.

The webhook calls `verify_signature` first (any SignatureRejected: 401), then `parse_callback`
(MalformedCallback: acknowledge 2xx and quarantine). Duplicates and replays inside the window
pass both: the inbox dedupes on `request_id`, and the callback guard ignores stale decisions.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, NoReturn

from bot.approval.decision import Decision
from bot.approval.errors import MalformedCallback, SignatureFault, SignatureRejected
from bot.core.states import Flow

TIMESTAMP_HEADER = "X-Approval-Timestamp"
SIGNATURE_HEADER = "X-Approval-Signature"
#: Seconds a callback's timestamp may be away from our clock, either way (5 minutes, as
#: docs/approval-protocol.md says).
REPLAY_WINDOW = 300
#: A callback is a few hundred bytes; anything past this is not one.
MAX_CALLBACK_BYTES = 64 * 1024
#: JSON nested deeper than this is refused before it is parsed (the callback itself is 2 deep).
MAX_DEPTH = 8
#: Longest id accepted (the inbox's delivery_key and operations.approval_id are 255 wide).
MAX_ID_LENGTH = 255
#: Largest MR iid accepted (GitLab iids are 32-bit integers).
MAX_MR_IID = 2**31 - 1

_PREFIX = "sha256="
_DIGEST_PREFIX = "sha256:"
_HEX = frozenset("0123456789abcdefABCDEF")
_MAX_TIMESTAMP_DIGITS = 15


@dataclass(frozen=True, slots=True)
class ApprovalCallback:
    """The approval system's word on one request, reduced to what the state machine needs."""

    request_id: str
    operation_id: str
    approval_id: str
    decision: Decision
    mr_iid: int | None = None
    #: ext.change.digest: the digest of the change identity the approvers saw (hex, lowercase)
    change_digest: str | None = None

    @property
    def flow(self) -> Flow:
        """The flow the payload's shape says: MR-first exactly when ext.mrId is present."""
        return Flow.MR_FIRST if self.mr_iid is not None else Flow.APPROVE_FIRST


def sign(secret: str, timestamp: str | int, body: bytes) -> str:
    """The X-Approval-Signature value for this timestamp and raw body."""
    message = str(timestamp).encode("utf-8") + b"." + body
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    return _PREFIX + digest


def verify_signature(
    secret: str,
    timestamp: str | None,
    body: bytes,
    signature_header: str | None,
    now: float,
    window: int = REPLAY_WINDOW,
) -> None:
    """Decides whether a callback is authentic and fresh; raises SignatureRejected if not."""
    if not secret:
        raise SignatureRejected(SignatureFault.UNCONFIGURED)
    if not timestamp or not signature_header:
        raise SignatureRejected(SignatureFault.MISSING)
    timestamp = timestamp.strip()
    given = signature_header.strip()
    if not (
        timestamp.isascii()
        and timestamp.isdigit()
        and len(timestamp) <= _MAX_TIMESTAMP_DIGITS
        and given[: len(_PREFIX)].lower() == _PREFIX
        and len(given) == len(_PREFIX) + 64
        and _HEX.issuperset(given[len(_PREFIX) :])
    ):
        raise SignatureRejected(SignatureFault.MALFORMED)
    if abs(now - int(timestamp)) > window:
        raise SignatureRejected(SignatureFault.STALE)
    expected = sign(secret, timestamp, body)[len(_PREFIX) :]
    if not hmac.compare_digest(expected, given[len(_PREFIX) :].lower()):
        raise SignatureRejected(SignatureFault.MISMATCH)


def parse_callback(body: bytes) -> ApprovalCallback:
    """Reads a callback body; raises MalformedCallback (and nothing else) when it is unusable."""
    data = _load(body)
    if not isinstance(data, dict):
        _reject("the body is not a JSON object")
    decision = _decision(data.get("decision"))
    ext = data.get("ext")
    if ext is None:
        ext = {}
    elif not isinstance(ext, dict):
        _reject("ext is not an object")
    return ApprovalCallback(
        request_id=_text(data, "request_id", numbers=True),
        operation_id=_text(data, "operation_id", numbers=False),
        approval_id=_text(data, "approval_id", numbers=True),
        decision=decision,
        mr_iid=_mr_iid(ext.get("mrId")),
        change_digest=_change_digest(ext.get("change")),
    )


def _reject(reason: str) -> NoReturn:
    raise MalformedCallback(reason)


def _load(body: bytes) -> Any:
    """The body as JSON: UTF-8, small, shallow, no duplicate keys and no NaN or Infinity."""
    if len(body) > MAX_CALLBACK_BYTES:
        _reject(f"the body is larger than {MAX_CALLBACK_BYTES} bytes")
    try:
        text = bytes(body).decode("utf-8")
    except UnicodeDecodeError:
        _reject("the body is not UTF-8")
    if _deeper_than(text, MAX_DEPTH):
        _reject(f"JSON nested deeper than {MAX_DEPTH}")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and integers too long to convert
        _reject("the body is not JSON")


def _deeper_than(text: str, limit: int) -> bool:
    """True when arrays and objects nest past `limit` (exact for valid JSON, which is enough)."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Builds an object, refusing a repeated key (parsers disagree on which one wins)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            _reject(f"duplicate key {_quote(key)}")
        result[key] = value
    return result


def _no_constant(name: str) -> NoReturn:
    _reject(f"{name} is not JSON")


def _decision(value: object) -> Decision:
    """A final decision (a callback never says pending)."""
    if value is None:
        _reject("decision is missing")
    if not isinstance(value, str):
        _reject("decision is not a string")
    try:
        decision = Decision(value)
    except ValueError:
        _reject(f"unknown decision {_quote(value)}")
    if not decision.final:
        _reject(f"decision {_quote(value)} is not a callback decision")
    return decision


def _text(data: dict[str, Any], key: str, *, numbers: bool) -> str:
    """A required, non-empty id field (an integer is accepted where `numbers` allows it)."""
    value = data.get(key)
    if value is None:
        _reject(f"{key} is missing")
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        _reject(f"{key} is not a string")
    if not value.strip():
        _reject(f"{key} is empty")
    if len(value) > MAX_ID_LENGTH:
        _reject(f"{key} is longer than {MAX_ID_LENGTH} characters")
    if not value.isprintable():
        _reject(f"{key} has control or unpaired surrogate characters")
    return value


def _mr_iid(value: object) -> int | None:
    """ext.mrId as an int: absent or null is None; an int or a string of digits is accepted."""
    if value is None:
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        _reject("ext.mrId is not an integer")
    if not 1 <= value <= MAX_MR_IID:
        _reject("ext.mrId is out of range")
    return value


def _change_digest(change: object) -> str | None:
    """ext.change.digest, optional: 64 hex digits (a "sha256:" prefix is allowed), lowercased."""
    if change is None:
        return None
    if not isinstance(change, dict):
        _reject("ext.change is not an object")
    digest = change.get("digest")
    if digest is None:
        return None
    if not isinstance(digest, str):
        _reject("ext.change.digest is not a string")
    hexdigits = digest[len(_DIGEST_PREFIX) :] if digest.startswith(_DIGEST_PREFIX) else digest
    if len(hexdigits) != 64 or not _HEX.issuperset(hexdigits):
        _reject("ext.change.digest is not a SHA-256 hex digest")
    return hexdigits.lower()


def _quote(value: str) -> str:
    """A short, printable rendering of a value from the payload for a quarantine reason."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:39] + "…"
