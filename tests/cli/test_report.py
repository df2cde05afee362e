"""`gitops-bot report`: where changes waited, as an operator reads it (the figures come from
tests/db/test_report.py's changes, fired at chosen moments; the command's clock is pinned)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.engine import Engine

from bot.store import models
from tests.cli import Run
from tests.db.test_report import NOW, changes


@pytest.fixture(autouse=True)
def pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's `now` is the changes' NOW."""
    monkeypatch.setattr(models, "utcnow", lambda: NOW)


def test_report_prints_each_state_and_the_slowest(db: Engine, run: Run) -> None:
    ids = changes(db)
    result = run("report")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("Time in state, stays that ended since 2026-11-30 12:00:00 UTC or go on:")
    assert lines[1].split() == ["STATE", "STAYS", "STILL", "P50", "P95", "MAX"]
    assert [line.split() for line in lines[2:8]] == [
        ["APPROVAL_SENDING", "4", "0", "45s", "2m", "2m"],
        ["APPROVAL_SENT", "4", "0", "30m", "2h", "2h"],
        ["MR_CREATING", "4", "1", "10m", "30s", "58m", "15s", "58m", "15s"],
        ["MR_CREATED", "3", "0", "10s", "20s", "20s"],
        ["MERGING", "3", "1", "5m", "1h", "47m", "1h", "47m"],
        ["MERGED", "2", "0", "10m", "20m", "20m"],
    ]
    assert lines[9] == "Slowest changes (the state each spent longest in):"
    slowest = [line.split()[:4] for line in lines[11:]]
    assert slowest == [
        [ids["B"], "APPROVAL_SENT", "2h", "B"],
        [ids["A"], "APPROVAL_SENT", "1h", "A"],
        [ids["E"], "MR_CREATING", "58m", "15s"],
        [ids["C"], "APPROVAL_SENT", "30m", "C"],
    ]
    assert lines[13].endswith("58m 15s (still)  E")


def test_report_of_a_project_over_an_hour_as_json(db: Engine, run: Run) -> None:
    ids = changes(db)
    result = run("report", "--since", "1h", "--project", "platform/config", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["since"] == "2026-12-01T11:00:00+00:00"
    assert body["states"] == [
        {
            "state": "MERGING",
            "stays": 1,
            "current": 1,
            "p50_seconds": 6470.0,
            "p95_seconds": 6470.0,
            "max_seconds": 6470.0,
        }
    ]
    assert [(s["operation_id"], s["current"]) for s in body["slowest"]] == [(ids["B"], True)]


def test_an_empty_window_says_so(run: Run) -> None:
    result = run("report", "--since", "30m")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "no change moved since 2026-12-01 11:30:00 UTC and none is waiting"
    )


@pytest.mark.parametrize("since", ["yesterday", "0h", "24", "1h 30m"])
def test_a_window_that_is_no_duration_is_refused(run: Run, since: str) -> None:
    result = run("report", "--since", since)
    assert result.exit_code == 1
    assert "not a duration" in result.output
