"""ensure_hook and list_hooks against a mocked GitLab: one hook, and disabled hooks reported."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import responses
from responses import matchers

from bot.gitlab import HookView, disabled_hooks, ensure_hook, list_hooks
from tests.adapters.test_gitlab_harness import P, account, calls, mock_gitlab

HOOKS = f"{P}/hooks"
OUR_URL = "https://bot.example.com/webhooks/gitlab"
EVENTS = ["merge_requests_events", "note_events", "pipeline_events", "deployment_events"]
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HOOK_TOKEN = "hook-secret-123456"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


def _hook(hook_id: int, url: str = OUR_URL, **kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"id": hook_id, "url": url, "alert_status": "executable"}
    data.update({name: True for name in EVENTS})
    data.update(kw)
    return data


def test_ensure_hook_twice_makes_one_hook(rsps: responses.RequestsMock) -> None:
    """The first call creates our hook; the second finds it by URL and updates it in place."""
    expected = {
        "url": OUR_URL,
        "token": HOOK_TOKEN,
        "push_events": False,
        "merge_requests_events": True,
        "note_events": True,
    }
    rsps.add(responses.GET, HOOKS, json=[_hook(1, "https://other.example.com/hook")])
    rsps.add(
        responses.POST,
        HOOKS,
        status=201,
        json=_hook(8),
        match=[matchers.json_params_matcher(expected, strict_match=False)],
    )
    rsps.add(responses.GET, HOOKS, json=[_hook(1, "https://other.example.com/hook"), _hook(8)])
    rsps.add(
        responses.PUT,
        f"{HOOKS}/8",
        json=_hook(8),
        match=[matchers.json_params_matcher(expected, strict_match=False)],
    )
    project = account().project(42)

    first = ensure_hook(project, OUR_URL, HOOK_TOKEN, EVENTS, now=NOW)
    second = ensure_hook(project, OUR_URL, HOOK_TOKEN, EVENTS, now=NOW)

    assert (first.created, second.created) == (True, False)
    assert first.hook.id == second.hook.id == 8
    assert calls(rsps).count("POST /projects/42/hooks") == 1
    assert len(rsps.calls) == 4  # two per call: list + POST, then list + PUT


def test_disabled_hook_is_reported(rsps: responses.RequestsMock) -> None:
    """A hook GitLab disabled (alert_status or disabled_until ahead) is reported as such."""
    rsps.add(
        responses.GET,
        HOOKS,
        json=[
            _hook(8, alert_status="temporarily_disabled", disabled_until="2025-06-01T12:30:00Z"),
            _hook(9, "https://b.example.com", alert_status="disabled"),
            _hook(10, "https://c.example.com", disabled_until="2025-06-01T11:00:00Z"),
        ],
    )
    rsps.add(responses.PUT, f"{HOOKS}/8", json=_hook(8))

    hooks = list_hooks(account().project(42))
    result = ensure_hook(account().project(42), OUR_URL, HOOK_TOKEN, EVENTS, now=NOW)

    assert [h.id for h in disabled_hooks(hooks, NOW)] == [8, 9]
    assert result.was_disabled is True
    assert result.disabled is False


def test_disabled_until_in_the_future_alone_counts() -> None:
    """A hook still marked executable but with disabled_until ahead is disabled."""
    hook = HookView.from_json(_hook(8, disabled_until="2025-06-01T13:00:00+00:00"))

    assert hook.disabled(NOW) is True
    assert hook.disabled(datetime(2025, 6, 1, 14, 0, tzinfo=UTC)) is False


def test_unknown_event_name_is_refused(rsps: responses.RequestsMock) -> None:
    """A misspelled event name is an error before any call."""
    with pytest.raises(ValueError, match="merge_request_event"):
        ensure_hook(account().project(42), OUR_URL, HOOK_TOKEN, ["merge_request_event"], now=NOW)
    assert len(rsps.calls) == 0
