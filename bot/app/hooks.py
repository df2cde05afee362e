"""The webhooks check: hooks GitLab disabled after failed deliveries, on every managed project,
and whether the bot's own branches (`gitops/*`) are protected there as `hooks install` sets them.

A disabled hook silently starves the bot (no MR, pipeline, note or deployment events), and an
unprotected `gitops/*` lets anyone who may push there change a change after its approval. So a
periodic job lists each managed project's hooks and reads its `gitops/*` rule through the author
account, and keeps the result (bot/store/hooks.py) for the dashboard's banner, for
`gitops-bot hooks check` and for the scrape, whichever process answers it: the
`gitops_hooks_disabled` and `gitops_branch_protection_missing{project}` gauges are read from it
(bot/app/gauges.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from bot.config import Settings
from bot.gitlab import Account, GitLabError, disabled_hooks, list_hooks
from bot.gitlab.protection import MAINTAINERS, author_identity, judge, read_protection
from bot.services import Services
from bot.store.hooks import DisabledHook, HooksReport, named_projects, save_report
from bot.store.models import utcnow

log = logging.getLogger(__name__)

#: The events the bot's hook subscribes to (`gitops-bot hooks install`).
EVENTS = ("merge_requests_events", "pipeline_events", "note_events", "deployment_events")


def receiver_url(settings: Settings) -> str:
    """Where GitLab sends the bot its events: `{GITOPS_PUBLIC_URL}/webhooks/gitlab`."""
    return f"{settings.public_url.rstrip('/')}/webhooks/gitlab"


def managed_projects(services: Services) -> list[str]:
    """GITOPS_PROJECTS and every project an operation names, sorted, each once."""
    return sorted({*services.settings.projects, *named_projects(services.engine)})


def run_check(
    account: Account, projects: Iterable[str], our_url: str, now: datetime
) -> HooksReport:
    """Lists each project's hooks and reads its `gitops/*` rule (one call each, and one GET /user
    per check); a project GitLab refuses is an error entry."""
    report = HooksReport(checked_at=now)
    wanted = our_url.rstrip("/")
    author: int | None = None
    for project in projects:
        report.projects.append(project)
        try:
            hooks = list_hooks(account.project(project))
        except GitLabError as exc:
            report.errors[project] = str(exc)
            log.warning("hooks check: cannot list hooks: %s", exc, extra={"project": project})
            continue
        if not any(hook.url.rstrip("/") == wanted for hook in hooks):
            report.missing.append(project)
        for hook in disabled_hooks(hooks, now):
            report.disabled.append(
                DisabledHook(
                    project=project,
                    hook_id=hook.id,
                    url=hook.url,
                    alert_status=hook.alert_status,
                    disabled_until=hook.disabled_until.isoformat() if hook.disabled_until else None,
                    ours=hook.url.rstrip("/") == wanted,
                )
            )
        try:
            if author is None:
                author = author_identity(account)[0]
            verdict = judge(read_protection(account.project(project)), author)
        except GitLabError as exc:
            report.errors[project] = str(exc)
            log.warning("hooks check: cannot read protection: %s", exc, extra={"project": project})
            continue
        if not verdict.ok:
            report.unprotected[project] = verdict.text
        elif verdict.mode == MAINTAINERS:
            report.fallback.append(project)
    return report


def record(services: Services, report: HooksReport) -> None:
    """Keeps the report for the dashboard and the gauges (an upsert of one row)."""
    save_report(services.engine, report)


def check(services: Services, now: datetime | None = None) -> HooksReport | None:
    """The periodic job: checks every managed project's hooks; None when GitLab is not set up."""
    settings = services.settings
    if not settings.gitlab_token:
        log.info("hooks check skipped: GITOPS_GITLAB_TOKEN is not set")
        return None
    projects = managed_projects(services)
    author = services.require_clients().author
    report = run_check(author, projects, receiver_url(settings), now or utcnow())
    record(services, report)
    if report.disabled:
        log.warning(
            "hooks check: GitLab disabled %d webhook(s)",
            len(report.disabled),
            extra={"projects": sorted({hook.project for hook in report.disabled})},
        )
    if report.unprotected:
        log.warning(
            "hooks check: the bot's branches are not protected in %d project(s)",
            len(report.unprotected),
            extra={"projects": sorted(report.unprotected)},
        )
    return report
