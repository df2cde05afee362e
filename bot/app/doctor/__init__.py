"""`gitops-bot doctor`: the whole configuration checked against the real services.

Each check is a small function returning a `Check` (name, ok/miss/skipped, what was found, the
fix for a miss). A check that cannot be made because an earlier one failed (a project's hooks
when the author token is not valid) is skipped, not missed, so one fault shows as one miss.
Nothing here writes anywhere: every call is a read (GET) or a database query.

The checks live by what they look at: `services.py` (database, queue, approval system, public
URL, callbacks), `accounts.py` (GitLab, the tokens, distinct users), `projects.py` (each managed
project); `checklist.py` holds the `Check` they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from bot.app.doctor.accounts import check_distinct, check_gitlab, check_token
from bot.app.doctor.checklist import MISS, OK, SKIPPED, Check, Identity
from bot.app.doctor.projects import (
    check_access,
    check_approve,
    check_branch_cleanup,
    check_hook,
    check_merge,
    check_protection,
    read_membership,
)
from bot.app.doctor.services import (
    check_approval,
    check_callbacks,
    check_database,
    check_deliveries,
    check_public_url,
    check_queue,
)
from bot.app.hooks import receiver_url
from bot.core.redact import redact
from bot.services import Services
from bot.store.hooks import named_targets

__all__ = ["MISS", "OK", "SKIPPED", "Check", "misses", "run", "targets_of"]


def targets_of(services: Services, database_ok: bool) -> dict[str, list[str]]:
    """GITOPS_PROJECTS, and the projects requests name when the database can be read, each
    with the target branches its requests name."""
    named = named_targets(services.engine) if database_ok else {}
    return {
        project: named.get(project, []) for project in sorted({*services.settings.projects, *named})
    }


def run(services: Services, now: datetime) -> list[Check]:
    """Every check, in the order a setup is done, with no credential in what it says (URLs'
    passwords and every configured secret masked: the output is pasted into tickets)."""
    secrets = services.settings.secrets()
    return [
        replace(check, detail=redact(check.detail, secrets), fix=redact(check.fix, secrets))
        for check in _checks(services, now)
    ]


def _checks(services: Services, now: datetime) -> list[Check]:
    settings = services.settings
    clients = services.require_clients()
    database = check_database(services)
    checks = [database, check_queue(services), check_gitlab(settings, clients.author)]
    identities: list[Identity] = []
    accounts = [(clients.author, settings.gitlab_token)]
    accounts += list(zip(clients.approvers, settings.approver_tokens, strict=True))
    gitlab_ok = checks[-1].status == OK
    for account, token in accounts:
        if not gitlab_ok:
            checks.append(Check(f"token {account.label}", SKIPPED, "GitLab does not answer"))
            continue
        check, who = check_token(account.label, account, token)
        checks.append(check)
        if who is not None:
            identities.append(who)
    if not settings.approver_tokens:
        checks.append(
            Check(
                "token approvers",
                MISS,
                "GITOPS_APPROVER_TOKENS is not set",
                "set GITOPS_APPROVER_TOKENS to the approval bots' tokens",
            )
        )
    checks.append(check_distinct(identities))
    author = next((who for who in identities if who.label == "author"), None)
    targets = targets_of(services, database.status == OK)
    if not targets:
        checks.append(
            Check(
                "projects",
                SKIPPED,
                "no managed projects: none in GITOPS_PROJECTS, none named by a request",
            )
        )
    url = receiver_url(settings).rstrip("/")
    for project, branches in targets.items():
        memberships = [read_membership(project, who) for who in identities]
        author_access = next((m for m in memberships if m.who is author), None)
        checks.append(check_access(project, author_access))
        checks.append(check_merge(project, author_access, branches))
        checks.append(
            check_approve(project, [m for m in memberships if m.who is not author], author)
        )
        checks.append(check_hook(author, project, url, now))
        checks.append(check_protection(author, project))
        checks.append(check_branch_cleanup(project, author_access))
    checks.append(check_deliveries(services, now, database.status == OK))
    checks.append(check_approval(services))
    checks.append(check_public_url(settings))
    checks.append(check_callbacks(settings))
    return checks


def misses(checks: Sequence[Check]) -> list[Check]:
    """The checks that failed (the command exits 1 when there is one)."""
    return [check for check in checks if check.status == MISS]
