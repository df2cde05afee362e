"""What handling one event did: moved an operation, or was stale (and why)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.fire import TransitionMade


@dataclass(frozen=True, slots=True)
class EventHandled:
    """An event's effect: the transition it made, or the reason it changed nothing."""

    operation_id: str | None
    moved: TransitionMade | None = None
    stale: str | None = None
    #: run the operation's step now although nothing moved (its MR changed under it)
    nudge: bool = False

    @property
    def drive(self) -> bool:
        """True when the operation moved (or was nudged) and its next step should run."""
        return self.moved is not None or self.nudge
