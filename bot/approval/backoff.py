"""How long a scheduled job waits before its next attempt at a call that failed transiently."""

from __future__ import annotations

#: Past this many doublings every delay is the cap anyway; stops 2**attempt overflowing a float.
_MAX_EXPONENT = 64


def backoff(attempt: int, base: float = 2.0, cap: float = 300.0) -> float:
    """Decides the delay in seconds before retry number `attempt` (0 first): base * 2**attempt.

    Pure and deterministic (no jitter, no sleep): the caller schedules the retry, and should
    wait at least an error's `retry_after` when the approval system sent one.
    """
    if base < 0 or cap < 0:
        raise ValueError(f"backoff needs base >= 0 and cap >= 0, got base={base}, cap={cap}")
    exponent = min(max(attempt, 0), _MAX_EXPONENT)
    return float(min(cap, base * 2**exponent))
