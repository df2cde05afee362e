"""Picks the table row an event takes, given the operation's snapshot."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.events import Event
from bot.core.guards import GUARDS, Snapshot
from bot.core.states import BindingState
from bot.core.table import Transition, candidates


@dataclass(frozen=True, slots=True)
class ResolvedRow:
    """The row taken (None: illegal here) and why each guarded row was refused."""

    transition: Transition | None
    refused: tuple[str, ...] = ()


def resolve(source: BindingState | None, event: Event, snapshot: Snapshot) -> ResolvedRow:
    """Decides which transition (source, event) takes; a guard that raises counts as "no"."""
    refused: list[str] = []
    for row in candidates(source, event):
        if row.guard is None:
            return ResolvedRow(row, tuple(refused))
        try:
            ok = GUARDS[row.guard](snapshot)
        except Exception as exc:  # noqa: BLE001 - a broken guard is a "no", with its reason
            refused.append(f"{row.guard}: raised {type(exc).__name__}: {exc}")
            continue
        if ok:
            return ResolvedRow(row, tuple(refused))
        refused.append(f"{row.guard}: false")
    return ResolvedRow(None, tuple(refused))
