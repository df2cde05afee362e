"""The operator's `doctor`: the checklist bot/app/doctor/ makes, for people and for scripts."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.app.doctor import MISS, Check, misses, run
from bot.config import Settings
from gitops_bot.wiring import build_services

MARKS = {"ok": "ok", "miss": "MISS", "skipped": "skipped"}


def diagnose(settings: Settings, now: datetime) -> list[Check]:
    """Runs every check on services built as the bot builds them, released afterwards."""
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its revision read is chatty
    services = build_services(settings)
    try:
        return run(services, now)
    finally:
        services.close()


def doctor_text(checks: Sequence[Check]) -> str:
    """One line per check (status, name, what was found), each miss followed by its fix."""
    width = max(len(check.name) for check in checks)
    lines = []
    for check in checks:
        lines.append(f"{MARKS[check.status]:<7}  {check.name:<{width}}  {check.detail}")
        if check.status == MISS and check.fix:
            lines.append(f"{'':<7}  {'':<{width}}  fix: {check.fix}")
    missed = len(misses(checks))
    verdict = f"{missed} miss(es)" if missed else "all well"
    lines += ["", f"{len(checks)} checks: {verdict}"]
    return "\n".join(lines)


def doctor_json(checks: Sequence[Check]) -> dict[str, Any]:
    """The checklist for scripts: `ok` is false when a check missed."""
    return {"ok": not misses(checks), "checks": [check.as_json() for check in checks]}
