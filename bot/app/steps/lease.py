"""The lease a running step holds on its operation, renewed by its own heartbeat (no thread).

A step takes a short lease (GITOPS_STEP_LEASE, 30 s) and renews it at its natural boundaries:
before every GitLab and approval-system call (bot/gitlab/client.py, bot/approval/client.py call
`bot.heartbeat.beat()`), before its own writes and between chained steps. A renewal is one UPDATE
and happens only once a third of the lease has passed, so a beat costs nothing most of the time.
Each call is bounded by GITOPS_GITLAB_TIMEOUT (10 s, at most two thirds of the lease, checked at
startup), so a live step's lease never runs out between two beats; a SIGKILLed worker's runs out
within the lease, and the next sweep (every GITOPS_SWEEP_INTERVAL, 20 s) re-drives the step: a
change moves again within lease + sweep interval = 30 + 20 = 50 s with the defaults.

Two drivers never run a step at once: a lease is taken only when it has expired, and a step
whose lease was taken (its worker stalled longer than the lease) learns it at its next beat,
which raises LeaseLost before any further call or write. A write already on its way is pinned to
the operation's version (fire()'s compare-and-set), so it is refused if the new holder moved the
operation first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.errors import LeaseLost
from bot.store.engine import Engine
from bot.store.models import utcnow
from bot.store.operations import renew_lease

log = logging.getLogger(__name__)


@dataclass
class Lease:
    """One worker's lease on one operation, as taken by take_lease()."""

    engine: Engine
    operation_id: str
    token: str
    seconds: float
    #: when the lease was last taken or renewed (its expiry is this + seconds)
    renewed_at: datetime = field(default_factory=utcnow)
    renewals: int = 0

    def beat(self, now: datetime | None = None) -> None:
        """Renews the lease once a third of it has passed; raises LeaseLost if it is gone."""
        now = now or utcnow()
        if now - self.renewed_at < timedelta(seconds=self.seconds / 3):
            return
        if not renew_lease(self.engine, self.operation_id, self.token, self.seconds, now):
            log.warning(
                "lease lost: another worker runs this step now; stopping",
                extra={"operation_id": self.operation_id},
            )
            raise LeaseLost(f"{self.operation_id}: the step's lease was taken by another worker")
        self.renewed_at = now
        self.renewals += 1
