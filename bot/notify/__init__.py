"""The adapter to API submitters' callback receivers: one signed POST, nothing followed.

A callback is signed the way the approval system signs its callbacks to us
(bot/approval/callback.py's `sign`: `sha256=` HMAC-SHA256 of `<timestamp>.<body>`), under
GITOPS_CALLBACK_SECRET, with the delivery's id beside it. The answer's body is never read;
a redirect is not followed (and is a refusal: the URL is wrong); messages name the host only,
never the URL's path or query (which may hold the receiver's own token).
"""

from __future__ import annotations

import requests

from bot.approval.callback import sign
from bot.core.callbacks import host_of
from bot.errors import CannotProceed, TransientError

TIMESTAMP_HEADER = "X-Gitops-Timestamp"
SIGNATURE_HEADER = "X-Gitops-Signature"
DELIVERY_HEADER = "X-Gitops-Delivery"
#: Answers worth another try later (the receiver is busy or timed out); any other 4xx refuses.
RETRYABLE = frozenset({408, 429})


def signed_headers(secret: str, timestamp: int, body: bytes, delivery_id: str) -> dict[str, str]:
    """The headers of one callback: timestamp, signature, delivery id, content type."""
    return {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, timestamp, body),
        DELIVERY_HEADER: delivery_id,
    }


def post_callback(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> None:
    """POSTs one callback. A 2xx returns; TransientError: try again later (no answer, 408, 429,
    5xx); CannotProceed: the receiver refused it (another 4xx) or redirected (3xx)."""
    host = host_of(url)
    try:
        # stream: the answer's body is never downloaded, only its status read
        response = requests.post(
            url, data=body, headers=headers, timeout=timeout, allow_redirects=False, stream=True
        )
    except requests.RequestException as exc:
        # the exception's text names the URL: only its kind is kept
        raise TransientError(f"callback to {host}: no answer ({type(exc).__name__})") from None
    status = response.status_code
    response.close()
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        raise CannotProceed(f"callback to {host} answered {status}: redirects are not followed")
    if status in RETRYABLE or status >= 500:
        raise TransientError(f"callback to {host} answered {status}")
    raise CannotProceed(f"callback to {host} refused: {status}")
