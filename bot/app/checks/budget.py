"""How long the checks of a change's files may take, on any runner.

The checks parse and validate what people with Developer access wrote (files, schemas, their
patterns), so each has a cooperative deadline, not a signal: the embedded server runs its steps
on threads, where Python delivers no SIGALRM. The loops that walk repository content ask the
deadline at every step (every YAML node composed, every bracket scanned, every keyword a JSON
Schema validator evaluates, every key a pattern is matched against), and a spent deadline stops
them with `OutOfTime`, which the checks turn into a problem naming the file; nothing between two
questions can run long (patterns run on a linear-time engine with a bound on each match's work:
bot/app/checks/ecma_regex.py).

A change's checks get MAX_CHANGE_SECONDS in all, and each file at most MAX_FILE_SECONDS of it, so
one hostile file cannot starve the others of their checks. The limits leave room for the largest
honest file: PyYAML (pure Python, which the per-node depth and time bounds need) reads a
512 KiB YAML file, the API's largest, in about 4.5 s on the reference machine. Tests give a
`Budget` of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: The most seconds the checks of one file take (its syntax and every schema applied to it).
MAX_FILE_SECONDS = 10.0
#: The most seconds the checks of one change take, all its files together.
MAX_CHANGE_SECONDS = 30.0


class OutOfTime(BaseException):
    """The deadline passed; `str()` says which limit. A BaseException, so that no library's
    `except Exception` between the question and the checks swallows it."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point on `clock` past which the work asking stops, and the words saying so."""

    ends: float
    why: str
    clock: Callable[[], float] = time.monotonic

    def spent(self) -> bool:
        """Whether the deadline has passed."""
        return self.clock() > self.ends

    def check(self) -> None:
        """Raises OutOfTime once the deadline has passed (cheap: one clock read)."""
        if self.clock() > self.ends:
            raise OutOfTime(self.why)

    def left(self) -> float:
        """Seconds until the deadline (negative once passed)."""
        return self.ends - self.clock()


def no_deadline() -> Deadline:
    """A deadline that never passes (the checks' own callers always pass one)."""
    return Deadline(float("inf"), "never")


@dataclass(frozen=True, slots=True)
class Budget:
    """The time limits of a change's checks: per file and for the whole change."""

    per_file: float = MAX_FILE_SECONDS
    per_change: float = MAX_CHANGE_SECONDS
    clock: Callable[[], float] = field(default=time.monotonic)

    def start(self) -> ChangeClock:
        """The change's checks start now."""
        return ChangeClock(self, self.clock() + self.per_change)


@dataclass(frozen=True, slots=True)
class ChangeClock:
    """A change's checks under way: each file's deadline is its own limit or the change's end,
    whichever comes first."""

    budget: Budget
    ends: float

    def spent(self) -> bool:
        """Whether the change's own limit has passed (no file may start)."""
        return self.budget.clock() > self.ends

    def change_spent(self) -> str:
        """What a file not checked because the change's limit passed is told."""
        return f"not checked: the checks of this change took more than {self.budget.per_change:g} s"

    def for_file(self) -> Deadline:
        """The deadline of a file whose checks start now."""
        file_ends = self.budget.clock() + self.budget.per_file
        if file_ends <= self.ends:
            why = f"not checked: checking this file took more than {self.budget.per_file:g} s"
            return Deadline(file_ends, why, self.budget.clock)
        return Deadline(self.ends, self.change_spent(), self.budget.clock)
