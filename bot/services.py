"""The long-lived objects of one process, built once by the composition root (gitops_bot).

`gitops_bot.wiring.build_services(settings)` makes them; the web app gets them from
`create_app(services)`, jobs from the process's job context (jobs/context.py), the CLI directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.approval import ApprovalClient
from bot.config import Settings
from bot.gitlab import Account, ApproveComponent
from bot.queueing import WorkQueue
from bot.store.engine import Engine


class NoClients(RuntimeError):
    """These services were built without GitLab accounts and an approval-system client."""


@dataclass
class Clients:
    """The outside world as this process's jobs reach it (built once, reused by every job)."""

    author: Account
    approvers: list[Account]
    approve: ApproveComponent
    approval: ApprovalClient

    def close(self) -> None:
        """Releases the approval client's connections."""
        self.approval.close()


@dataclass
class Services:
    """Shared by the web app, the workers and the CLI of one process."""

    settings: Settings
    engine: Engine
    queue: WorkQueue
    #: the Redis client under the queue (fakeredis when embedded); None in pure unit tests
    redis: Any = None
    #: GitLab and the approval system; None where nothing calls out (some tests' services)
    clients: Clients | None = None

    def require_clients(self) -> Clients:
        """The clients, or NoClients saying these services cannot call out."""
        if self.clients is None:
            raise NoClients(
                "these services have no GitLab or approval-system clients "
                "(gitops_bot.wiring.build_services makes them; a test passes its own)"
            )
        return self.clients

    def close(self) -> None:
        """Releases connections (tests and the CLI call this on the way out)."""
        self.engine.dispose()
        if self.clients is not None:
            self.clients.close()
