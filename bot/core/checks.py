"""Validates the transition table; `gitops-bot transitions check` prints what this finds."""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.events import Event
from bot.core.guards import GUARDS
from bot.core.states import TERMINAL, WAITS, BindingState
from bot.core.table import EFFECT_GUARDS, TABLE, Transition

#: The only events allowed out of a terminal state.
_LEAVE_TERMINAL = frozenset({Event.SUBMIT, Event.REVERT})


def reachable(table: Sequence[Transition] = TABLE) -> set[BindingState]:
    """States reachable from "no binding yet", ignoring guards."""
    seen: set[BindingState] = set()
    frontier: list[BindingState | None] = [None]
    while frontier:
        here = frontier.pop()
        for row in table:
            if row.source == here and row.target not in seen:
                seen.add(row.target)
                frontier.append(row.target)
    return seen


def problems(table: Sequence[Transition] = TABLE) -> list[str]:
    """Every fault in the table; an empty list means it is sound."""
    found: list[str] = []
    for state in sorted(set(BindingState) - reachable(table)):
        found.append(f"{state}: not reachable from a new request")
    for state in sorted(set(BindingState) - TERMINAL):
        if not any(r.source == state and r.target != state for r in table):
            found.append(f"{state}: in flight but has no exit")
        if state not in WAITS:
            found.append(f"{state}: in flight but has no deadline and is not a documented wait")
    seen: set[tuple[BindingState | None, Event, str | None]] = set()
    for row in table:
        where = f"{row.source} --{row.event}--> {row.target}"
        if row.source in TERMINAL and row.event not in _LEAVE_TERMINAL:
            found.append(f"{where}: leaves a terminal state other than by re-apply or revert")
        if row.guard is not None and row.guard not in GUARDS:
            found.append(f"{where}: unknown guard {row.guard!r}")
        key = (row.source, row.event, row.guard)
        if key in seen:
            found.append(f"{where}: duplicate row")
        seen.add(key)
    found.extend(
        f"effect {effect}: unknown guard {name!r}"
        for effect, name in EFFECT_GUARDS.items()
        if name not in GUARDS
    )
    return found
