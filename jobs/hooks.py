"""The webhooks check: hooks GitLab disabled after failed deliveries, on every managed project,
and whether the bot's own branches (`gitops/*`) are protected there as `hooks install` sets them.

A disabled hook silently starves the bot (no MR, pipeline, note or deployment events), and an
unprotected `gitops/*` lets anyone who may push there change a change after its approval. So a
periodic job lists each managed project's hooks and reads its `gitops/*` rule through the author
account, sets the `gitops_hooks_disabled` and `gitops_branch_protection_missing{project}` gauges
and keeps the result for the dashboard's banner and for `gitops-bot hooks check`. The result is
one JSON row in the `flags` table under `RESULT_KEY`, a key that is not a flag (not in
`flags.DEFAULTS`), so flag reads and listings never see it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import Gauge
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.gitlab import Account, GitLabError, disabled_hooks, list_hooks
from bot.gitlab.protection import MAINTAINERS, author_identity, judge, read_protection
from bot.store.models import FLAGS, OPERATIONS, utcnow
from jobs import runtime

log = logging.getLogger(__name__)

DISABLED = Gauge(
    "gitops_hooks_disabled",
    "Webhooks GitLab has disabled on the managed projects, as of the last hooks check.",
)
UNPROTECTED = Gauge(
    "gitops_branch_protection_missing",
    "1 when the bot's branches (gitops/*) are not protected as `gitops-bot hooks install` sets "
    "them in a managed project (missing or wrong), 0 when they are; as of the last hooks check.",
    ["project"],
)

#: The `flags` row holding the last check's result (deliberately not a flag).
RESULT_KEY = "status.hooks_check"
#: The events the bot's hook subscribes to (`gitops-bot hooks install`).
EVENTS = ("merge_requests_events", "pipeline_events", "note_events", "deployment_events")


@dataclass(frozen=True)
class DisabledHook:
    """A hook GitLab stopped sending to; `ours` when it points at the bot's receiver."""

    project: str
    hook_id: int
    url: str
    alert_status: str | None
    #: ISO 8601, when GitLab disabled it only for a while
    disabled_until: str | None
    ours: bool


@dataclass
class HooksReport:
    """What one check found, per project: disabled hooks, no hook of ours, or no answer."""

    checked_at: datetime
    projects: list[str] = field(default_factory=list)
    disabled: list[DisabledHook] = field(default_factory=list)
    #: projects with no hook pointing at the bot's receiver
    missing: list[str] = field(default_factory=list)
    #: project -> why it could not be checked
    errors: dict[str, str] = field(default_factory=dict)
    #: project -> what is wrong with its `gitops/*` protection (missing, or who else may push)
    unprotected: dict[str, str] = field(default_factory=dict)
    #: projects whose `gitops/*` is protected with the CE fallback (Maintainers, not one user)
    fallback: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The report as stored and as `hooks check --json` prints it."""
        return {
            "checked_at": self.checked_at.isoformat(),
            "projects": list(self.projects),
            "disabled": [asdict(hook) for hook in self.disabled],
            "missing": list(self.missing),
            "errors": dict(self.errors),
            "unprotected": dict(self.unprotected),
            "fallback": list(self.fallback),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HooksReport:
        """Reads a stored report back."""
        return cls(
            checked_at=datetime.fromisoformat(data["checked_at"]),
            projects=[str(p) for p in data.get("projects", [])],
            disabled=[DisabledHook(**hook) for hook in data.get("disabled", [])],
            missing=[str(p) for p in data.get("missing", [])],
            errors={str(k): str(v) for k, v in data.get("errors", {}).items()},
            unprotected={str(k): str(v) for k, v in data.get("unprotected", {}).items()},
            fallback=[str(p) for p in data.get("fallback", [])],
        )


def receiver_url(settings: Settings) -> str:
    """Where GitLab sends the bot its events: `{GITOPS_PUBLIC_URL}/webhooks/gitlab`."""
    return f"{settings.public_url.rstrip('/')}/webhooks/gitlab"


def managed_projects(engine: Engine, settings: Settings) -> list[str]:
    """GITOPS_PROJECTS and every project an operation names, sorted, each once."""
    with engine.connect() as conn:
        named = conn.execute(select(OPERATIONS.c.project).distinct()).scalars().all()
    return sorted({*settings.projects, *named})


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


def record(engine: Engine, report: HooksReport) -> None:
    """Keeps the report for the dashboard (an upsert of one row) and sets the gauge."""
    value = report.as_json()
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(FLAGS).values(key=RESULT_KEY, value=value, updated_at=report.checked_at)
    stmt = stmt.on_conflict_do_update(
        index_elements=[FLAGS.c.key], set_={"value": value, "updated_at": report.checked_at}
    )
    with engine.begin() as conn:
        conn.execute(stmt)
    DISABLED.set(len(report.disabled))
    UNPROTECTED.clear()
    for project in report.projects:
        if project not in report.errors:
            UNPROTECTED.labels(project=project).set(1 if project in report.unprotected else 0)


def last_report(engine: Engine) -> HooksReport | None:
    """The last check's report, or None before the first (or when the row is unreadable)."""
    with engine.connect() as conn:
        value = conn.execute(
            select(FLAGS.c.value).where(FLAGS.c.key == RESULT_KEY)
        ).scalar_one_or_none()
    if not isinstance(value, dict):
        return None
    try:
        return HooksReport.from_json(value)
    except (KeyError, TypeError, ValueError):
        log.warning("hooks check: the stored report is unreadable; ignored")
        return None


def check(now: datetime | None = None) -> HooksReport | None:
    """The periodic job: checks every managed project's hooks; None when GitLab is not set up."""
    services = runtime.services()
    settings = services.settings
    if not settings.gitlab_token:
        log.info("hooks check skipped: GITOPS_GITLAB_TOKEN is not set")
        return None
    projects = managed_projects(services.engine, settings)
    report = run_check(runtime.clients().author, projects, receiver_url(settings), now or utcnow())
    record(services.engine, report)
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
