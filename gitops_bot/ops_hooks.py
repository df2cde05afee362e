"""The operator's `hooks install` and `hooks check`: the project webhook that feeds the bot."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.app.hooks import EVENTS, managed_projects, receiver_url, record, run_check
from bot.config import Settings
from bot.gitlab import GitLabError, HookResult, ensure_hook
from bot.gitlab.protection import (
    AUTHOR_ONLY,
    BOT_BRANCHES,
    ProtectionResult,
    author_identity,
    ensure_protection,
)
from bot.services import Services
from bot.store.hooks import HooksReport
from gitops_bot.ops import Refused, table
from webhooks.pages import utc


def _needs_gitlab(settings: Settings) -> None:
    if not settings.gitlab_token:
        raise Refused("GITOPS_GITLAB_TOKEN is not set: the author bot's token reads the hooks")


def install_hook(services: Services, project: str, url: str | None) -> tuple[HookResult, str]:
    """Creates or updates the project's hook to the bot (MR, pipeline, note, deployment events)."""
    settings = services.settings
    _needs_gitlab(settings)
    if not settings.webhook_secret:
        raise Refused(
            "GITOPS_WEBHOOK_SECRET is not set: a hook without the secret would be refused by "
            "the bot, and GitLab disables a hook whose deliveries fail"
        )
    target = url or receiver_url(settings)
    if not target.startswith(("https://", "http://")):
        raise Refused(f"--url must be an http(s) URL, got {target!r}")
    account = services.require_clients().author
    try:
        result = ensure_hook(account.project(project), target, settings.webhook_secret, EVENTS)
    except GitLabError as exc:
        raise Refused(f"{project}: {exc}") from None
    return result, target


def protect_branches(services: Services, project: str) -> tuple[ProtectionResult, str]:
    """Protects `gitops/*` so only the author account pushes and merges there (CE: Maintainers);
    returns what was done and the author's username."""
    _needs_gitlab(services.settings)
    account = services.require_clients().author
    try:
        author_id, username = author_identity(account)
        return ensure_protection(account.project(project), author_id), username
    except GitLabError as exc:
        raise Refused(f"{project}: cannot protect {BOT_BRANCHES}: {exc}") from None


def protect_text(project: str, result: ProtectionResult, username: str) -> str:
    """What `hooks install` did to the bot's branches, and the CE fallback when it applies."""
    verdict = result.verdict
    if not verdict.ok:
        return (
            f"NOT PROTECTED as needed: {BOT_BRANCHES} on {project}: {verdict.text} "
            f"(GitLab kept the rule otherwise than asked; fix it in Settings > Repository)"
        )
    done = {"created": "protected", "fixed": "fixed", "unchanged": "already protected"}
    head = f"{done[result.action]}: {BOT_BRANCHES} on {project}"
    was = f" (was: {'; '.join(result.before)})" if result.action == "fixed" else ""
    if verdict.mode == AUTHOR_ONLY:
        return f"{head}: only @{username} may push and merge{was}"
    return (
        f"{head}: Maintainers may push and merge{was}; GitLab did not take a rule for one user "
        f"(CE or Free tier), so the fallback is Maintainers (access level 40): keep @{username} "
        f"a Maintainer and other Maintainers few"
    )


def install_text(project: str, result: HookResult) -> str:
    """What `hooks install` did."""
    verb = "created" if result.created else "updated"
    events = ", ".join(sorted(result.hook.events))
    return f"{verb} hook #{result.hook.id} on {project} -> {result.hook.url} ({events})"


def check_hooks(services: Services, projects: Sequence[str], now: datetime) -> HooksReport:
    """Checks the given projects (default: every managed one) and keeps the result."""
    settings = services.settings
    _needs_gitlab(settings)
    chosen = list(projects) or managed_projects(services)
    report = run_check(services.require_clients().author, chosen, receiver_url(settings), now)
    record(services, report)
    return report


def check_text(report: HooksReport) -> str:
    """Disabled hooks, projects without the bot's hook, and projects that could not be read."""
    if not report.projects:
        return "no managed projects (none named by an operation, and GITOPS_PROJECTS is unset)"
    lines = [f"checked {len(report.projects)} project(s) at {utc(report.checked_at)} UTC"]
    if report.disabled:
        rows = [
            [
                hook.project,
                f"#{hook.hook_id}",
                hook.alert_status or "disabled",
                hook.disabled_until or "-",
                "yes" if hook.ours else "no",
                hook.url,
            ]
            for hook in report.disabled
        ]
        lines += [
            f"DISABLED: GitLab stopped sending to {len(rows)} hook(s)",
            table(["PROJECT", "HOOK", "STATUS", "UNTIL", "OURS", "URL"], rows),
            "fix the receiver, then send a test event from the project's webhook settings "
            "(GitLab re-enables a hook after a successful test)",
        ]
    else:
        lines.append("no disabled hooks")
    for project in report.missing:
        lines.append(f"missing: {project} has no hook to the bot (gitops-bot hooks install)")
    for project, why in sorted(report.unprotected.items()):
        lines.append(
            f"UNPROTECTED: {BOT_BRANCHES} on {project}: {why} (gitops-bot hooks install {project})"
        )
    for project in report.fallback:
        lines.append(f"fallback: {BOT_BRANCHES} on {project} is protected for Maintainers (CE)")
    for project, why in sorted(report.errors.items()):
        lines.append(f"unchecked: {project}: {why}")
    return "\n".join(lines)


def check_status(report: HooksReport) -> int:
    """Exit status: 1 when a hook is disabled or the bot's branches are not protected, 2 when a
    project could not be read, else 0."""
    if report.disabled or report.unprotected:
        return 1
    return 2 if report.errors else 0
