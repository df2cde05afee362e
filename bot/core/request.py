"""What a caller asks fire() to do: one event for one operation, with who, why and what to set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from bot.core.events import Event, Source


@dataclass(frozen=True, slots=True)
class TransitionRequest:
    """One transition asked for; `bot.store.fire.fire()` applies it or refuses it as a whole.

    Immutable (the changes are copied read-only), so a retry can fire the same request again.
    What the caller holds of the operation (`CurrentState`) is not part of the request: it is a
    cache that saves a read and goes stale, while the request stays what was asked.
    """

    operation_id: str
    event: Event
    #: the operation version the caller acted on; another version is a Conflict (None: any)
    expected_version: int | None = None
    source: Source = Source.JOB
    actor: str | None = None
    correlation_id: str | None = None
    #: operation columns to set with the step (fire() refuses any it may not write)
    changes: Mapping[str, Any] = field(default_factory=dict)
    #: free text for the audit row
    detail: str | None = None
    #: when it happened (audit, updated_at, stamps); None: the time fire() runs
    now: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", MappingProxyType(dict(self.changes or {})))
