"""The operator's `hooks install` and `hooks check`: the project webhook that feeds the bot."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.gitlab import GitLabError, HookResult, author_account, ensure_hook
from gitops_bot.ops import Refused, table
from jobs.hooks import EVENTS, HooksReport, managed_projects, receiver_url, record, run_check
from webhooks.pages import utc


def _needs_gitlab(settings: Settings) -> None:
    if not settings.gitlab_token:
        raise Refused("GITOPS_GITLAB_TOKEN is not set: the author bot's token reads the hooks")


def install_hook(settings: Settings, project: str, url: str | None) -> tuple[HookResult, str]:
    """Creates or updates the project's hook to the bot (MR, pipeline, note, deployment events)."""
    _needs_gitlab(settings)
    if not settings.webhook_secret:
        raise Refused(
            "GITOPS_WEBHOOK_SECRET is not set: a hook without the secret would be refused by "
            "the bot, and GitLab disables a hook whose deliveries fail"
        )
    target = url or receiver_url(settings)
    if not target.startswith(("https://", "http://")):
        raise Refused(f"--url must be an http(s) URL, got {target!r}")
    account = author_account(settings)
    try:
        result = ensure_hook(account.project(project), target, settings.webhook_secret, EVENTS)
    except GitLabError as exc:
        raise Refused(f"{project}: {exc}") from None
    return result, target


def install_text(project: str, result: HookResult) -> str:
    """What `hooks install` did."""
    verb = "created" if result.created else "updated"
    events = ", ".join(sorted(result.hook.events))
    return f"{verb} hook #{result.hook.id} on {project} -> {result.hook.url} ({events})"


def check_hooks(
    engine: Engine, settings: Settings, projects: Sequence[str], now: datetime
) -> HooksReport:
    """Checks the given projects (default: every managed one) and keeps the result."""
    _needs_gitlab(settings)
    chosen = list(projects) or managed_projects(engine, settings)
    report = run_check(author_account(settings), chosen, receiver_url(settings), now)
    record(engine, report)
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
    for project, why in sorted(report.errors.items()):
        lines.append(f"unchecked: {project}: {why}")
    return "\n".join(lines)


def check_status(report: HooksReport) -> int:
    """Exit status: 1 when a hook is disabled, 2 when a project could not be read, else 0."""
    if report.disabled:
        return 1
    return 2 if report.errors else 0
