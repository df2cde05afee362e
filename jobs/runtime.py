"""The services a worker process's jobs run on: built once per process, or set by the embedded
runner and by tests. Job functions take ids and plain values and ask for services here."""

from __future__ import annotations

from dataclasses import dataclass

from bot.approval import ApprovalClient
from bot.config import Settings
from bot.gitlab import Account, ApproveComponent, approver_accounts, author_account
from bot.services import Services

_services: Services | None = None


def use(services: Services | None) -> None:
    """Sets (or clears) the services jobs in this process use."""
    global _services
    _services = services


def services() -> Services:
    """This process's services, built from the environment on first use."""
    global _services
    if _services is None:
        from gitops_bot.wiring import build_services

        _services = build_services(Settings.from_env())
    return _services


@dataclass
class Clients:
    """The outside world as this process's jobs reach it (built once, reused by every job)."""

    author: Account
    approvers: list[Account]
    approve: ApproveComponent
    approval: ApprovalClient


_clients: Clients | None = None


def use_clients(clients: Clients | None) -> None:
    """Sets (or clears) the clients jobs in this process use (tests point them at doubles)."""
    global _clients
    _clients = clients


def clients() -> Clients:
    """This process's GitLab accounts and approval-system client, built on first use."""
    global _clients
    if _clients is None:
        settings = services().settings
        _clients = Clients(
            author=author_account(settings),
            approvers=approver_accounts(settings),
            approve=ApproveComponent(),
            approval=ApprovalClient(settings.approval_url),
        )
    return _clients
