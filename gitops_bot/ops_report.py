"""The operator's `report`: where changes waited over a window (bot/store/report.py), as a table
per state (p50, p95, max) and the slowest changes."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from bot.store.report import TimeReport
from gitops_bot.ops import Refused, table
from webhooks.pages import duration, utc

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+)([smhd])")

#: What `gitops-bot report` says when nothing moved or waits in the window.
EMPTY = "no change moved since {since} UTC and none is waiting"


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `24h`, `7d` or a sum of them (`1h30m`); a refusal otherwise."""
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise Refused(f"not a duration: {text!r} (say 90s, 30m, 24h, 7d or 1h30m)")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise Refused(f"not a duration: {text!r} (it must be longer than 0s)")
    return timedelta(seconds=seconds)


def _spent(seconds: float, current: bool) -> str:
    return duration(seconds) + (" (still)" if current else "")


def report_text(report: TimeReport) -> str:
    """The states' figures, then the slowest changes; times for people."""
    scope = f" in {report.project}" if report.project else ""
    since = utc(report.since)
    if not report.states:
        return EMPTY.format(since=since) + scope
    rows = [
        [
            f.state.value,
            str(f.count),
            str(f.current),
            duration(f.p50),
            duration(f.p95),
            duration(f.max),
        ]
        for f in report.states
    ]
    head = f"Time in state{scope}, stays that ended since {since} UTC or go on:"
    states = table(["STATE", "STAYS", "STILL", "P50", "P95", "MAX"], rows)
    slow = table(
        ["OPERATION", "STATE", "TIME", "TITLE"],
        [
            [s.operation_id, s.state.value, _spent(s.seconds, s.current), s.title]
            for s in report.slowest
        ],
    )
    return f"{head}\n{states}\n\nSlowest changes (the state each spent longest in):\n{slow}"


def report_json(report: TimeReport) -> dict[str, Any]:
    """The same for scripts: seconds as numbers, times in ISO 8601."""
    return {
        "since": report.since.isoformat(),
        "now": report.now.isoformat(),
        "project": report.project,
        "states": [
            {
                "state": f.state.value,
                "stays": f.count,
                "current": f.current,
                "p50_seconds": f.p50,
                "p95_seconds": f.p95,
                "max_seconds": f.max,
            }
            for f in report.states
        ],
        "slowest": [
            {
                "operation_id": s.operation_id,
                "title": s.title,
                "project": s.project,
                "state": s.state.value,
                "seconds": s.seconds,
                "current": s.current,
                "entered_at": s.entered_at.isoformat(),
            }
            for s in report.slowest
        ],
    }


def window(now: datetime, since: str) -> datetime:
    """The window's start: `since` (a duration) before `now`."""
    return now - parse_duration(since)
