"""Fault injection (the next n matching calls fail) and the record of every call."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .routing import Reply

#: The status a fault answers with, or "timeout" for "the call may have happened".
FaultStatus = int | Literal["timeout"]


@dataclass
class FaultRule:
    """The next `remaining` calls matching methods and path answer `status`."""

    remaining: int
    status: FaultStatus
    methods: frozenset[str] | None = None
    path_contains: str | None = None
    retry_after: float | None = None
    apply: bool = True
    path_endswith: str | None = None

    def matches(self, method: str, path: str) -> bool:
        """Whether a call (method, decoded API path) is one this rule hits."""
        if self.methods is not None and method not in self.methods:
            return False
        if self.path_endswith is not None and not path.rstrip("/").endswith(self.path_endswith):
            return False
        return self.path_contains is None or self.path_contains in path

    @property
    def is_timeout(self) -> bool:
        """Whether this rule hangs (or raises ReadTimeout) instead of answering."""
        return self.status == "timeout"

    def reply(self) -> Reply:
        """The error answer for a status fault (GitLab's bodies: JSON, or Rack's text for 429)."""
        assert isinstance(self.status, int)
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(int(self.retry_after))
        if self.status == 429:
            return Reply(429, b"Retry later\n", headers)
        return Reply(self.status, {"message": f"{self.status} Injected fault"}, headers)


class FaultPlan:
    """The queued fault rules, consumed in order."""

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        #: every call fails with this probability (after the queued rules), with one of these
        self.random_rate = 0.0
        self.random_statuses: tuple[int, ...] = (500,)
        self.random = random.Random()

    def fail_randomly(self, rate: float, statuses: Sequence[int], seed: int | None) -> None:
        """Each later call fails with probability `rate`, answering one of `statuses`."""
        self.random_rate = rate
        self.random_statuses = tuple(statuses)
        self.random = random.Random(seed)

    def add(
        self,
        n: int,
        status: FaultStatus,
        methods: str | Iterable[str] | None,
        path_contains: str | None,
        retry_after: float | None,
        apply: bool,
        path_endswith: str | None = None,
    ) -> FaultRule:
        """Queues a rule for the next `n` matching calls."""
        if isinstance(methods, str):
            methods = [methods]
        wanted = frozenset(m.upper() for m in methods) if methods is not None else None
        rule = FaultRule(n, status, wanted, path_contains, retry_after, apply, path_endswith)
        self.rules.append(rule)
        return rule

    def take(self, method: str, path: str) -> FaultRule | None:
        """The first live rule matching this call, with one use consumed."""
        for rule in self.rules:
            if rule.remaining > 0 and rule.matches(method, path):
                rule.remaining -= 1
                return rule
        if self.random_rate > 0 and self.random.random() < self.random_rate:
            return FaultRule(0, self.random.choice(self.random_statuses))
        return None

    def pending(self) -> int:
        """How many faults are still queued."""
        return sum(rule.remaining for rule in self.rules)


@dataclass
class Call:
    """One recorded API call; `status` 0 when a non-applied timeout never answered."""

    method: str
    path: str
    query: dict[str, Any]
    body: Any
    status: int
    user: str | None = None
    fault: str | None = None
    #: when the call was answered (time.monotonic)
    at: float = field(default_factory=time.monotonic)


def select(
    calls: Iterable[Call],
    method: str | None = None,
    path_contains: str | None = None,
    path_endswith: str | None = None,
    status: int | None = None,
) -> list[Call]:
    """The calls matching every given filter (path is decoded, after `/api/v4`)."""
    return [
        call
        for call in calls
        if (method is None or call.method == method.upper())
        and (path_contains is None or path_contains in call.path)
        and (path_endswith is None or call.path.rstrip("/").endswith(path_endswith))
        and (status is None or call.status == status)
    ]
