"""The step functions of each workflow phase, one module per phase, run by steps/drive.py.

A step reads GitLab, takes a pure decision on what it read (decide.py, returning one of
decisions.py's types) and does it (perform.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.services import Clients, Services
from bot.store.operations import OperationRow


@dataclass(frozen=True)
class StepContext:
    """What a step function runs with."""

    services: Services
    clients: Clients
    op: OperationRow
    now: datetime
    #: run by the job a wait scheduled (pinned to the operation's version), not by an event's
    #: nudge: only such a run schedules the wait's next poll, so a nudge adds no second chain
    scheduled: bool = False
    #: the poll that scheduled this run, as its wait recorded it (steps/waits.py superseded)
    token: str | None = None
