"""approve_once and the approve component (both implementations) against a mocked GitLab."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
from responses import matchers

from bot.gitlab import (
    Account,
    ApproveComponent,
    ApproveImpl,
    ApproveOutcome,
    ApproveResult,
    GitLabUnavailable,
    RateLimited,
    Unauthorized,
    UnknownOutcome,
    Unprocessable,
    approve_once,
)
from tests.adapters.test_gitlab_harness import SHA, P, account, calls, mock_gitlab

ME = "approver-bot-1"
APPROVALS = f"{P}/merge_requests/7/approvals"
APPROVE = f"{P}/merge_requests/7/approve"
ITEMS = f"{P}/approval_check_items"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


@pytest.fixture
def approver() -> Account:
    """One approval bot whose username is already known."""
    return account("approver-1", token="glpat-approver-1-abcdefgh", username=ME)


def _approvals(rsps: responses.RequestsMock, *names: str, status: int = 200) -> None:
    body: Any = {"approved_by": [{"user": {"username": n}} for n in names]}
    rsps.add(responses.GET, APPROVALS, json=body if status == 200 else {}, status=status)


def _approve(rsps: responses.RequestsMock, status: int, **kw: Any) -> None:
    body = kw.pop("json", {"id": 1} if status < 300 else {"message": f"{status}"})
    rsps.add(responses.POST, APPROVE, status=status, json=body, **kw)


def _once(acct: Account, attempt: int = 0, max_retries: int = 0, **kw: Any) -> ApproveResult:
    component = kw.pop("component", None) or ApproveComponent()
    return approve_once(acct, 42, 7, SHA, attempt, max_retries, component=component, **kw)


def test_approve_pinned_to_sha(rsps: responses.RequestsMock, approver: Account) -> None:
    """A first approve reads the approvals, then approves pinned to the head sha."""
    _approvals(rsps, "someone-else")
    _approve(rsps, 201, match=[matchers.json_params_matcher({"sha": SHA})])

    result = _once(approver)

    assert result.outcome is ApproveOutcome.APPROVED
    assert result.ok
    assert len(rsps.calls) == 2


def test_already_approved_skips_the_call(rsps: responses.RequestsMock, approver: Account) -> None:
    """An account that already approved sends nothing (ALREADY)."""
    _approvals(rsps, ME)

    assert _once(approver).outcome is ApproveOutcome.ALREADY
    assert calls(rsps) == ["GET /projects/42/merge_requests/7/approvals"]


def test_username_read_once_per_account(rsps: responses.RequestsMock) -> None:
    """The account's username comes from GET /user once and is cached on the account."""
    acct = account("approver-1", username=None)
    rsps.add(responses.GET, "https://gitlab.example.com/api/v4/user", json={"username": ME})
    _approvals(rsps, ME)
    _approvals(rsps, ME)

    assert _once(acct).outcome is ApproveOutcome.ALREADY
    assert _once(acct).outcome is ApproveOutcome.ALREADY
    assert calls(rsps).count("GET /user") == 1
    assert acct.username() == ME


def test_repeat_on_old_gitlab_401_then_approvals_show_us(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """Older GitLab: a repeat approve answers 401; on the last attempt the approvals show us."""
    _approvals(rsps)  # read first: a replica lag, or a concurrent approve, hides it
    _approve(rsps, 401)
    _approvals(rsps, ME)

    result = _once(approver, attempt=2, max_retries=2)

    assert result.outcome is ApproveOutcome.APPROVED
    assert result.status_code == 401


def test_repeat_on_new_gitlab_304_counts_as_success(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """Newer GitLab: a repeat approve answers 304; the approvals read shows us: success."""
    _approvals(rsps)
    rsps.add(responses.POST, APPROVE, status=304)
    _approvals(rsps, ME)

    result = _once(approver)

    assert result.outcome is ApproveOutcome.APPROVED
    assert result.status_code == 304


def test_401_not_approved_retries_before_the_last_attempt(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """A 401 with attempts left asks for a retry after backoff(attempt), without a read-back."""
    _approvals(rsps)
    _approve(rsps, 401)

    result = _once(approver, attempt=1, max_retries=3)

    assert result.outcome is ApproveOutcome.RETRY
    assert result.retry_in == 4.0  # backoff(1)
    assert len(rsps.calls) == 2


def test_401_not_approved_fails_after_the_last_attempt(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """A 401 on the last attempt with approvals not showing us is a real failure."""
    _approvals(rsps)
    _approve(rsps, 401)
    _approvals(rsps, "someone-else")

    result = _once(approver, attempt=3, max_retries=3)

    assert result.outcome is ApproveOutcome.FAILED
    assert result.status_code == 401
    assert len(rsps.calls) == 3


def test_negative_max_retries_means_one_attempt(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """A negative max_retries is 0: the first attempt is the last one."""
    _approvals(rsps)
    _approve(rsps, 401)
    _approvals(rsps)

    assert _once(approver, attempt=0, max_retries=-5).outcome is ApproveOutcome.FAILED


def test_failed_approvals_read_means_not_yet_approved(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """The approvals read is fail-open: a 500 there is "not yet approved", and we approve."""
    _approvals(rsps, status=500)
    _approve(rsps, 201)

    assert _once(approver).outcome is ApproveOutcome.APPROVED


def test_failed_read_back_on_last_attempt_is_a_failure(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """A 401 on the last attempt whose read-back fails is a failure, not an exception."""
    _approvals(rsps)
    _approve(rsps, 401)
    _approvals(rsps, status=502)

    assert _once(approver).outcome is ApproveOutcome.FAILED


def test_concurrent_approves_both_succeed(rsps: responses.RequestsMock, approver: Account) -> None:
    """Two approves racing for one account (one 201, one 401 that reads back us) both succeed."""
    _approvals(rsps)  # first worker's read
    _approvals(rsps)  # second worker's read, before the first approve landed
    _approve(rsps, 201)
    _approve(rsps, 401)
    _approvals(rsps, ME)  # second worker's read-back

    first = _once(approver, attempt=0, max_retries=0)
    second = _once(approver, attempt=0, max_retries=0)

    assert first.outcome is ApproveOutcome.APPROVED
    assert second.outcome is ApproveOutcome.APPROVED
    assert calls(rsps).count("POST /projects/42/merge_requests/7/approve") == 2


def test_head_moved_409(rsps: responses.RequestsMock, approver: Account) -> None:
    """A 409 (sha is not the head) is HEAD_MOVED at once, with no retry."""
    _approvals(rsps)
    _approve(rsps, 409, json={"message": "SHA does not match HEAD of source branch"})

    result = _once(approver, attempt=0, max_retries=3)

    assert result.outcome is ApproveOutcome.HEAD_MOVED
    assert result.status_code == 409


@pytest.mark.parametrize(("headers", "expected"), [({"Retry-After": "120"}, 120.0), ({}, None)])
def test_rate_limited_approve_is_transient_with_its_retry_after(
    rsps: responses.RequestsMock, approver: Account, headers: dict[str, str], expected: float
) -> None:
    """A 429 is raised as RateLimited carrying Retry-After (the step's retry honours it) and
    uses none of the refusal attempts, even on the last one."""
    _approvals(rsps)
    _approve(rsps, 429, headers=headers)

    with pytest.raises(RateLimited) as caught:
        _once(approver, attempt=2, max_retries=2)

    assert (caught.value.status_code, caught.value.retry_after) == (429, expected)
    assert len(rsps.calls) == 2  # python-gitlab did not retry on its own


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_on_the_last_approve_attempt_is_transient_not_a_failure(
    rsps: responses.RequestsMock, approver: Account, status: int
) -> None:
    """GitLab's 5xx is its trouble, not a refusal: raised as transient, no read-back, and the
    request does not fail however many refusal attempts were used."""
    _approvals(rsps)
    _approve(rsps, status)

    with pytest.raises(GitLabUnavailable) as caught:
        _once(approver, attempt=3, max_retries=3)

    assert caught.value.status_code == status
    assert len(rsps.calls) == 2


def test_timeout_on_approve_is_transient_and_the_retry_finds_the_approval(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """An approve whose answer timed out may have landed: it is raised as UnknownOutcome, and
    the next attempt's read-first finds the approval and sends nothing."""
    _approvals(rsps)
    rsps.add(responses.POST, APPROVE, body=requests.exceptions.ReadTimeout("read timed out"))
    _approvals(rsps, ME)

    with pytest.raises(UnknownOutcome):
        _once(approver)
    assert _once(approver).outcome is ApproveOutcome.ALREADY
    assert calls(rsps).count("POST /projects/42/merge_requests/7/approve") == 1


def test_forbidden_fails_without_retry(rsps: responses.RequestsMock, approver: Account) -> None:
    """A 403 is not worth retrying: FAILED even with attempts left (after one read-back)."""
    _approvals(rsps)
    _approve(rsps, 403)
    _approvals(rsps)

    result = _once(approver, attempt=0, max_retries=5)

    assert (result.outcome, result.status_code) == (ApproveOutcome.FAILED, 403)


@pytest.mark.parametrize("impl", list(ApproveImpl))
@pytest.mark.parametrize(("status", "error"), [(401, Unauthorized), (422, Unprocessable)])
def test_both_implementations_raise_the_same_errors(
    rsps: responses.RequestsMock, approver: Account, impl: ApproveImpl, status: int, error: type
) -> None:
    """Either implementation raises the same exception type with GitLab's real status code."""
    if impl is ApproveImpl.DIRECT:
        rsps.add(responses.GET, ITEMS, json=[])
    _approve(rsps, status, json={"message": "refused"})

    with pytest.raises(error) as caught:
        ApproveComponent().approve(approver, 42, 7, SHA, impl=impl)

    assert caught.value.status_code == status


def test_direct_sends_the_configured_check_items(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """The direct approve reads the check items once per project and sends them with the sha."""
    rsps.add(responses.GET, ITEMS, json=["change-reviewed", "rollback-planned"])
    body = {"sha": SHA, "check_items": ["change-reviewed", "rollback-planned"]}
    _approve(rsps, 201, match=[matchers.json_params_matcher(body)])
    _approve(rsps, 201, match=[matchers.json_params_matcher(body)])
    component = ApproveComponent()

    component.approve(approver, 42, 7, SHA, impl="direct")
    component.approve(approver, 42, 7, SHA, impl="direct")

    assert calls(rsps).count("GET /projects/42/approval_check_items") == 1
    assert len(rsps.calls) == 3  # check items once, then one POST per approve


def test_check_items_422_rebuilds_and_retries_once(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """A 422 listing new check items is retried once at once with that list, which is cached."""
    rsps.add(responses.GET, ITEMS, json=["change-reviewed"])
    _approve(
        rsps,
        422,
        json={"message": "check items changed", "check_items": ["change-reviewed", "owner-ok"]},
        match=[matchers.json_params_matcher({"sha": SHA, "check_items": ["change-reviewed"]})],
    )
    new_body = {"sha": SHA, "check_items": ["change-reviewed", "owner-ok"]}
    _approve(rsps, 201, match=[matchers.json_params_matcher(new_body)])
    _approve(rsps, 201, match=[matchers.json_params_matcher(new_body)])
    component = ApproveComponent()

    component.approve(approver, 42, 7, SHA, impl=ApproveImpl.DIRECT)
    component.approve(approver, 42, 7, SHA, impl=ApproveImpl.DIRECT)  # from the refreshed cache

    assert component.check_items(approver, 42) == ("change-reviewed", "owner-ok")
    assert calls(rsps).count("GET /projects/42/approval_check_items") == 1


def test_check_items_422_twice_raises(rsps: responses.RequestsMock, approver: Account) -> None:
    """The self-heal retries once only: a second 422 is raised with its status code."""
    rsps.add(responses.GET, ITEMS, json=[])
    _approve(rsps, 422, json={"check_items": ["a"]})
    _approve(rsps, 422, json={"check_items": ["a", "b"]})

    with pytest.raises(Unprocessable) as caught:
        ApproveComponent().approve(approver, 42, 7, SHA, impl="direct")

    assert caught.value.status_code == 422
    assert calls(rsps).count("POST /projects/42/merge_requests/7/approve") == 2


def test_impl_flag_flipped_between_two_calls(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """The implementation is chosen per call: python-gitlab first, then direct, no restart."""
    _approvals(rsps)
    _approve(rsps, 201, match=[matchers.json_params_matcher({"sha": SHA})])
    _approvals(rsps)
    rsps.add(responses.GET, f"{P}/approve-items", json=["change-reviewed"])
    _approve(
        rsps,
        201,
        match=[matchers.json_params_matcher({"sha": SHA, "check_items": ["change-reviewed"]})],
    )
    component = ApproveComponent(check_items_path="/projects/{project}/approve-items")

    first = _once(approver, component=component, impl="python-gitlab")
    second = _once(approver, component=component, impl="direct")

    assert first.outcome is second.outcome is ApproveOutcome.APPROVED
    assert len(rsps.calls) == 5  # 2 (read, approve), then 3 (read, check items, approve)


def test_check_items_endpoint_missing_means_none(
    rsps: responses.RequestsMock, approver: Account
) -> None:
    """A 404 from the configuration endpoint means no check items (cached as such)."""
    rsps.add(responses.GET, ITEMS, status=404)
    component = ApproveComponent()

    assert component.check_items(approver, 42) == ()
    assert component.check_items(approver, 42) == ()
    assert len(rsps.calls) == 1


def test_unknown_impl_is_refused(approver: Account) -> None:
    """A flag value naming no implementation is an error, not a silent default."""
    with pytest.raises(ValueError, match="graphql"):
        ApproveComponent().approve(approver, 42, 7, SHA, impl="graphql")
