"""Error translation and the client: transient or not, Retry-After, no sleeping, no tokens."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import requests
import responses

from bot.config import Settings
from bot.errors import CannotProceed, TransientError
from bot.gitlab import (
    GitLabUnavailable,
    NotFound,
    RateLimited,
    UnknownOutcome,
    approver_accounts,
    author_account,
    close_mr,
    ensure_hook,
    read_mr,
    set_labels,
)
from bot.gitlab.calls import put_json
from bot.gitlab.errors import parse_retry_after
from tests.adapters.test_gitlab_harness import TOKEN, P, account, mock_gitlab, mr_json

MR = f"{P}/merge_requests/7"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


@pytest.mark.parametrize(("headers", "expected"), [({"Retry-After": "30"}, 30.0), ({}, None)])
def test_429_is_transient_with_retry_after(
    rsps: responses.RequestsMock, headers: dict[str, str], expected: float | None
) -> None:
    """A 429 raises RateLimited at once (no sleep, no retry) with Retry-After, else None."""
    rsps.add(responses.GET, MR, status=429, headers=headers, json={"message": "Retry later"})

    with pytest.raises(RateLimited) as caught:
        read_mr(account().project(42), 7)

    assert isinstance(caught.value, TransientError)
    assert (caught.value.status_code, caught.value.retry_after) == (429, expected)
    assert len(rsps.calls) == 1


def test_429_on_a_write_is_rate_limited_too(rsps: responses.RequestsMock) -> None:
    """A 429 on a write carries its Retry-After as well (it was not performed)."""
    rsps.add(responses.PUT, MR, status=429, headers={"Retry-After": "7"})

    with pytest.raises(RateLimited) as caught:
        set_labels(account().project(42), 7, add=["x"], remove=[])
    assert caught.value.retry_after == 7.0


def test_retry_after_as_http_date() -> None:
    """Retry-After given as an HTTP date is read as the seconds until then."""
    now = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

    assert parse_retry_after("Sun, 01 Jun 2025 12:01:30 GMT", now=now) == 90.0
    assert parse_retry_after("soon", now=now) is None


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_on_a_read_is_sent_once_more_then_transient(
    rsps: responses.RequestsMock, status: int
) -> None:
    """A read answered 5xx twice raises GitLabUnavailable with the real status, after two
    calls (the second at once); the scheduled retry is the caller's."""
    rsps.add(responses.GET, MR, status=status, body="<html>bad gateway</html>")

    with pytest.raises(GitLabUnavailable) as caught:
        read_mr(account().project(42), 7)

    assert caught.value.status_code == status
    assert not isinstance(caught.value, CannotProceed)
    assert len(rsps.calls) == 2


def test_a_read_answered_5xx_once_succeeds_on_its_resend(rsps: responses.RequestsMock) -> None:
    """One 502 blip on a read costs one more call, not a scheduled retry of the whole step."""
    rsps.add(responses.GET, MR, status=502, body="<html>bad gateway</html>")
    rsps.add(responses.GET, MR, json=mr_json())

    assert read_mr(account().project(42), 7).iid == 7
    assert len(rsps.calls) == 2


@pytest.mark.parametrize("status", [500, 503])
def test_a_write_answered_5xx_is_not_sent_again(rsps: responses.RequestsMock, status: int) -> None:
    """A write is never resent on the spot (the next attempt re-reads first): one call."""
    rsps.add(responses.PUT, MR, status=status)

    with pytest.raises(GitLabUnavailable):
        put_json(account().project(42).gl, "/projects/42/merge_requests/7", what="x", data={})

    assert len(rsps.calls) == 1


def test_connection_error_is_transient(rsps: responses.RequestsMock) -> None:
    """No connection is transient, with no status code."""
    rsps.add(responses.GET, MR, body=requests.exceptions.ConnectionError("refused"))

    with pytest.raises(GitLabUnavailable) as caught:
        read_mr(account().project(42), 7)
    assert caught.value.status_code is None
    assert not isinstance(caught.value, UnknownOutcome)


def test_timeout_on_a_read_is_plain_transient(rsps: responses.RequestsMock) -> None:
    """A read that times out changed nothing: transient, not an unknown outcome."""
    rsps.add(responses.GET, MR, body=requests.exceptions.ReadTimeout("read timed out"))

    with pytest.raises(GitLabUnavailable) as caught:
        read_mr(account().project(42), 7)
    assert not isinstance(caught.value, UnknownOutcome)


def test_timeout_on_a_write_is_unknown_outcome(rsps: responses.RequestsMock) -> None:
    """A write whose answer timed out may have happened: UnknownOutcome (still transient)."""
    rsps.add(responses.GET, MR, json=mr_json())
    rsps.add(responses.PUT, MR, body=requests.exceptions.ReadTimeout("read timed out"))

    with pytest.raises(UnknownOutcome) as caught:
        close_mr(account().project(42), 7)
    assert isinstance(caught.value, TransientError)


def test_connect_timeout_on_a_write_was_never_sent(rsps: responses.RequestsMock) -> None:
    """A write that could not connect never reached GitLab: plain transient, not unknown."""
    rsps.add(responses.PUT, MR, body=requests.exceptions.ConnectTimeout("connect timed out"))

    with pytest.raises(GitLabUnavailable) as caught:
        set_labels(account().project(42), 7, add=["x"], remove=[])
    assert not isinstance(caught.value, UnknownOutcome)


def test_404_is_deterministic_with_status(rsps: responses.RequestsMock) -> None:
    """A 404 is NotFound, a CannotProceed, carrying 404."""
    rsps.add(responses.GET, MR, status=404, json={"message": "404 Not found"})

    with pytest.raises(NotFound) as caught:
        read_mr(account().project(42), 7)
    assert isinstance(caught.value, CannotProceed)
    assert caught.value.status_code == 404


def test_no_token_in_error_messages(rsps: responses.RequestsMock) -> None:
    """A GitLab answer that echoes the token never puts it in the error's text."""
    rsps.add(responses.GET, MR, status=400, json={"message": f"bad header PRIVATE-TOKEN {TOKEN}"})

    with pytest.raises(CannotProceed) as caught:
        read_mr(account().project(42), 7)

    assert TOKEN not in str(caught.value)
    assert TOKEN not in repr(caught.value)
    assert caught.value.__cause__ is None


def test_clients_do_not_retry_and_have_a_timeout() -> None:
    """Accounts from settings: a timeout, no python-gitlab retries, no token in repr."""
    settings = Settings(
        gitlab_url="https://gitlab.example.com",
        gitlab_token="glpat-author-xxxxxxxxxxxx",
        approver_tokens=("glpat-one-xxxxxxxxxxxx", "glpat-two-xxxxxxxxxxxx"),
    )

    author = author_account(settings)
    approvers = approver_accounts(settings)

    assert [a.label for a in approvers] == ["approver-1", "approver-2"]
    for acct in [author, *approvers]:
        assert acct.gl.retry_transient_errors is False
        assert acct.gl.timeout is not None
        assert acct.gl.timeout > 0
        assert "glpat" not in repr(acct)


def test_token_shaped_text_is_masked_even_if_unknown(rsps: responses.RequestsMock) -> None:
    """A GitLab token this process never registered is still masked by its shape."""
    stranger = "glpat-Zz9Yy8Xx7Ww6Vv5Uu4Tt"
    rsps.add(responses.GET, MR, status=422, json={"message": f"token {stranger} is revoked"})

    with pytest.raises(CannotProceed) as caught:
        read_mr(account().project(42), 7)

    assert stranger not in str(caught.value)
    assert "[masked]" in str(caught.value)


def test_hook_secret_never_in_an_error(rsps: responses.RequestsMock) -> None:
    """A failed hook update that echoes the hook's secret token does not show it."""
    secret = "s3cr3t-hook-token-value"
    rsps.add(responses.GET, f"{P}/hooks", json=[{"id": 8, "url": "https://bot.example.com/h"}])
    rsps.add(responses.PUT, f"{P}/hooks/8", status=400, json={"message": f"bad token {secret}"})

    with pytest.raises(CannotProceed) as caught:
        ensure_hook(account().project(42), "https://bot.example.com/h", secret, ["note_events"])

    assert secret not in str(caught.value)
