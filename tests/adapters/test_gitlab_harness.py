"""Shared builders for the GitLab adapter tests (responses, no GitLab double), and their own checks.

The other `test_gitlab_*` modules import `mock_gitlab`, `account`, `mr_json` and `calls` from here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
import responses

from bot.gitlab import Account, make_client, read_mr

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
#: The project every test works on, and its API prefix.
PID = 42
P = f"{API}/projects/{PID}"
TOKEN = "glpat-author-0123456789abcdef"
SHA = "a" * 40
NEW_SHA = "b" * 40


@contextmanager
def mock_gitlab() -> Iterator[responses.RequestsMock]:
    """A responses mock that fails the test when a registered call never happens, or on a sleep."""
    slept = AssertionError("something slept: waits are the caller's scheduled jobs")
    adapter_log = logging.getLogger("bot.gitlab")
    level = adapter_log.level
    adapter_log.setLevel(logging.DEBUG)  # every log call builds its record (bad `extra` fails)
    try:
        with (
            mock.patch("time.sleep", side_effect=slept),
            responses.RequestsMock(assert_all_requests_are_fired=True) as rsps,
        ):
            yield rsps
    finally:
        adapter_log.setLevel(level)


def account(
    label: str = "author", *, token: str = TOKEN, username: str | None = "gitops-bot"
) -> Account:
    """An account on the test GitLab; `username` preset (None: read from GET /user)."""
    acct = Account(make_client(URL, token, timeout=5.0), label)
    acct._username = username
    return acct


def calls(rsps: responses.RequestsMock) -> list[str]:
    """The calls made so far as "METHOD /path" (API prefix and query stripped)."""
    out = []
    for call in rsps.calls:
        path = urlsplit(call.request.url or "").path.removeprefix("/api/v4")
        out.append(f"{call.request.method} {path}")
    return out


def mr_json(**kw: Any) -> dict[str, Any]:
    """A merge request as GitLab's API shows it; any field can be overridden."""
    data: dict[str, Any] = {
        "id": 1007,
        "iid": 7,
        "project_id": PID,
        "state": "opened",
        "detailed_merge_status": "mergeable",
        "merge_status": "can_be_merged",
        "sha": SHA,
        "merge_commit_sha": None,
        "squash_commit_sha": None,
        "merge_error": None,
        "rebase_in_progress": False,
        "has_conflicts": False,
        "draft": False,
        "labels": ["gitops::merging"],
        "author": {"id": 5, "username": "alice"},
        "source_project_id": PID,
        "target_project_id": PID,
        "source_branch": "gitops/op-1",
        "target_branch": "main",
        "web_url": f"{URL}/platform/config/-/merge_requests/7",
        "head_pipeline": {"id": 900, "status": "success"},
    }
    data.update(kw)
    return data


def test_mock_fails_when_a_registered_call_never_happens() -> None:
    """A registered but unused GitLab call fails the test (so every registration is checked)."""
    with (
        pytest.raises(AssertionError, match="Not all requests have been executed"),
        mock_gitlab() as mock,
    ):
        mock.add(responses.GET, f"{P}/merge_requests/7", json=mr_json())


def test_mock_fails_on_a_sleep() -> None:
    """Anything that sleeps while GitLab is mocked fails the test (nothing may wait inline)."""
    import time

    with pytest.raises(AssertionError, match="slept"), mock_gitlab():
        time.sleep(0.01)


def test_calls_lists_method_and_path() -> None:
    """The call log the tests compare against names each call by method and API path."""
    with mock_gitlab() as mock:
        mock.add(responses.GET, f"{P}/merge_requests/7", json=mr_json())
        read_mr(account().project(PID), 7)
        assert calls(mock) == ["GET /projects/42/merge_requests/7"]
