"""Whether a URL of the bot answers, as the approval system would call it back (`doctor`).

One GET, no redirects followed, no retries: the HTTP status, or None when no answer came (no
connection, a timeout, a TLS failure), with the error's name.
"""

from __future__ import annotations

import requests


def http_status(url: str, *, timeout: float = 5.0) -> tuple[int | None, str]:
    """GETs `url` once: (status, "") on an answer, (None, the error's name) on none."""
    try:
        with requests.get(url, timeout=timeout, allow_redirects=False, stream=True) as answer:
            return answer.status_code, ""
    except requests.RequestException as exc:
        return None, type(exc).__name__
