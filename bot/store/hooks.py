"""The hooks check's stored result, and the projects operations name (jobs/hooks.py checks).

The result is one JSON row in the `flags` table under `RESULT_KEY`, a key that is not a flag (not
in `flags.DEFAULTS`), so flag reads and listings never see it. The dashboard's banner and
`gitops-bot hooks check` read it back.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.store.flags import put_row
from bot.store.models import FLAGS, OPERATIONS

log = logging.getLogger(__name__)

#: The `flags` row holding the last check's result (deliberately not a flag).
RESULT_KEY = "status.hooks_check"


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


def named_projects(engine: Engine) -> list[str]:
    """Every project an operation names, each once."""
    with engine.connect() as conn:
        return list(conn.execute(select(OPERATIONS.c.project).distinct()).scalars().all())


def named_targets(engine: Engine) -> dict[str, list[str]]:
    """Every project an operation names, with the target branches its operations name."""
    query = select(OPERATIONS.c.project, OPERATIONS.c.target_branch).distinct()
    targets: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for project, branch in conn.execute(query):
            targets.setdefault(project, []).append(branch)
    return {project: sorted(branches) for project, branches in targets.items()}


def save_report(engine: Engine, report: HooksReport) -> None:
    """Keeps the report for the dashboard (an upsert of one row)."""
    put_row(engine, RESULT_KEY, report.as_json(), report.checked_at)


def last_report(engine: Engine) -> HooksReport | None:
    """The last check's report, or None before the first (or when the row is unreadable)."""
    with engine.connect() as conn:
        value = conn.execute(
            select(FLAGS.c.value).where(FLAGS.c.key == RESULT_KEY)
        ).scalar_one_or_none()
    return stored_report(value)


def stored_report(value: Any) -> HooksReport | None:
    """The report kept in the `flags` row's value, or None when there is none (or it is
    unreadable)."""
    if not isinstance(value, dict):
        return None
    try:
        return HooksReport.from_json(value)
    except (KeyError, TypeError, ValueError):
        log.warning("hooks check: the stored report is unreadable; ignored")
        return None
