"""What the double's tests share: a clock the test moves (its `clock` fixture: conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

START = datetime(2030, 1, 1, tzinfo=UTC)


class Clock:
    """A clock the test moves, starting at START."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Moves the clock on by `seconds`."""
        self.now += timedelta(seconds=seconds)
