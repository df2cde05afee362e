"""What an approval request can be decided as, and the event each decision fires."""

from __future__ import annotations

from enum import StrEnum

from bot.core.events import Event


class Decision(StrEnum):
    """An approval's state in the approval system (callbacks only ever carry the final three)."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"

    @property
    def final(self) -> bool:
        """True once approvers (or the withdraw call) have settled it for good."""
        return self is not Decision.PENDING

    @property
    def event(self) -> Event | None:
        """The state machine event this decision fires; None while it is still pending."""
        return _EVENTS.get(self)


_EVENTS = {
    Decision.APPROVED: Event.APPROVED,
    Decision.REJECTED: Event.REJECTED,
    Decision.WITHDRAWN: Event.WITHDRAWN,
}
