"""The approval system: a client for submit, withdraw and status, and callback verification.

The protocol (both directions) is described for its operators in docs/approval-protocol.md.
"""

from __future__ import annotations

from bot.approval.backoff import backoff
from bot.approval.callback import (
    REPLAY_WINDOW,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    ApprovalCallback,
    parse_callback,
    sign,
    verify_signature,
)
from bot.approval.client import ApprovalClient
from bot.approval.decision import Decision
from bot.approval.errors import (
    ApprovalCallFailed,
    ApprovalNotFound,
    ApprovalOutcomeUnknown,
    ApprovalUnavailable,
    MalformedCallback,
    SignatureFault,
    SignatureRejected,
)
from bot.approval.request import ApprovalRequest

__all__ = [
    "REPLAY_WINDOW",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "ApprovalCallFailed",
    "ApprovalCallback",
    "ApprovalClient",
    "ApprovalNotFound",
    "ApprovalOutcomeUnknown",
    "ApprovalRequest",
    "ApprovalUnavailable",
    "Decision",
    "MalformedCallback",
    "SignatureFault",
    "SignatureRejected",
    "backoff",
    "parse_callback",
    "sign",
    "verify_signature",
]
