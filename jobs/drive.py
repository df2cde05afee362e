"""RQ entry point `bot.queueing.DRIVE_JOB`: bot/app/steps/drive.py on this process's services."""

from __future__ import annotations

from bot.app.steps import drive as steps
from jobs import context


def drive(
    operation_id: str, expected_version: int | None = None, wait_token: str | None = None
) -> str:
    """Runs the operation's due steps (bot.app.steps.drive.drive)."""
    return steps.drive(context.services(), operation_id, expected_version, wait_token)
