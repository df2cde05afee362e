"""The approval client against a mocked approval system: bodies, headers and error translation."""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
from hypothesis import given
from hypothesis import strategies as st
from responses import matchers
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError

from bot.approval import (
    ApprovalCallFailed,
    ApprovalClient,
    ApprovalNotFound,
    ApprovalOutcomeUnknown,
    ApprovalRequest,
    ApprovalUnavailable,
    Decision,
    backoff,
)
from bot.approval.client import MAX_DETAIL_CHARS
from bot.core.events import Event
from bot.core.states import Flow
from bot.errors import CannotProceed, TransientError

BASE = "https://approvals.example.com/api"
SUBMIT_URL = f"{BASE}/approvals"
OPERATION_ID = "0b9f6c1e-5d4a-4c8e-9a51-3f2d7e8c9b10"
CALLBACK_URL = "https://gitops.example.com/webhooks/approval"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any sleep in the client (a hidden retry loop) fails the test."""

    def fail(seconds: float) -> None:
        raise AssertionError(f"the approval client slept {seconds}s")

    monkeypatch.setattr(time, "sleep", fail)


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked approval system; a registered call that never happens fails the test."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture
def client() -> ApprovalClient:
    """A client for the mocked approval system."""
    return ApprovalClient(BASE + "/", timeout=3.5)


def make_approval_request(**kw: Any) -> ApprovalRequest:
    """An approve-first approval request; every field can be overridden."""
    values: dict[str, Any] = {
        "operation_id": OPERATION_ID,
        "title": "Change replicas of service-1",
        "description": "replicas: 2 -> 3 in config/prod.yaml",
        "applicant": "alice",
        "callback_url": CALLBACK_URL,
    }
    values.update(kw)
    return ApprovalRequest(**values)


def expected_body(ext: dict[str, Any]) -> dict[str, Any]:
    """The submit body the approval system should receive for make_approval_request()."""
    return {
        "operation_id": OPERATION_ID,
        "title": "Change replicas of service-1",
        "description": "replicas: 2 -> 3 in config/prod.yaml",
        "applicant": "alice",
        "ext": ext,
        "callback_url": CALLBACK_URL,
    }


def submit_matchers(ext: dict[str, Any]) -> list[Any]:
    """Matchers for the exact submit body and its Idempotency-Key header."""
    return [
        matchers.json_params_matcher(expected_body(ext), strict_match=True),
        matchers.header_matcher({"Idempotency-Key": OPERATION_ID}),
    ]


# --- submit ------------------------------------------------------------------------------------


def test_submit_approve_first_has_no_mr_iid(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """An approve-first submit sends the body with an empty ext and returns the approval id."""
    rsps.post(SUBMIT_URL, json={"approval_id": "apr-1"}, status=201, match=submit_matchers({}))

    assert client.submit(make_approval_request()) == "apr-1"


def test_submit_approve_first_with_project_still_has_no_mr_iid(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """An approve-first submit that names its project carries the project but no mrId."""
    rsps.post(
        SUBMIT_URL,
        json={"approval_id": "apr-2"},
        match=submit_matchers({"project": "platform/config"}),
    )

    request = make_approval_request(project="platform/config")

    assert request.flow is Flow.APPROVE_FIRST
    assert client.submit(request) == "apr-2"


def test_submit_mr_first_carries_mr_iid_and_project_in_ext(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """An MR-first submit sends ext.mrId as an integer alongside the project."""
    rsps.post(
        SUBMIT_URL,
        json={"approval_id": "apr-3"},
        match=submit_matchers({"mrId": 42, "project": "platform/config"}),
    )

    request = make_approval_request(mr_iid=42, project="platform/config")

    assert request.flow is Flow.MR_FIRST
    assert client.submit(request) == "apr-3"
    assert b'"mrId": 42' in (rsps.calls[0].request.body or b"")


def test_every_call_passes_the_timeout(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """Every call to the approval system carries the client's timeout."""
    rsps.post(SUBMIT_URL, json={"approval_id": "apr-4"})
    rsps.post(f"{BASE}/approvals/apr-4/withdraw", status=204)
    rsps.get(f"{BASE}/approvals/apr-4", json={"approval_id": "apr-4", "decision": "pending"})

    client.submit(make_approval_request())
    client.withdraw("apr-4")
    client.status("apr-4")

    assert [c.request.req_kwargs["timeout"] for c in rsps.calls] == [3.5] * 3  # type: ignore[attr-defined]


def test_submit_accepts_a_numeric_approval_id(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A numeric approval id in the answer is returned as the string we store."""
    rsps.post(SUBMIT_URL, json={"approval_id": 9001})

    assert client.submit(make_approval_request()) == "9001"


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_submit_5xx_is_transient_with_its_status(
    rsps: responses.RequestsMock, client: ApprovalClient, status: int
) -> None:
    """A 5xx answer to submit is a transient error carrying the status and no Retry-After."""
    rsps.post(SUBMIT_URL, body="upstream down", status=status)

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert isinstance(caught.value, TransientError)
    assert not isinstance(caught.value, ApprovalOutcomeUnknown)
    assert caught.value.status_code == status
    assert caught.value.retry_after is None


def test_submit_429_carries_retry_after_seconds(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A 429 with Retry-After in seconds is transient and carries that delay."""
    rsps.post(SUBMIT_URL, status=429, headers={"Retry-After": "30"})

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 429
    assert caught.value.retry_after == 30.0


def test_submit_503_reads_an_http_date_retry_after(rsps: responses.RequestsMock) -> None:
    """A Retry-After given as an HTTP date becomes seconds from the injected clock."""
    client = ApprovalClient(BASE, clock=lambda: 1_445_412_480.0 - 90)  # 07:26:30 GMT
    rsps.post(SUBMIT_URL, status=503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 503
    assert caught.value.retry_after == 90.0


@pytest.mark.parametrize("header", [{}, {"Retry-After": "soon"}, {"Retry-After": "-5"}])
def test_submit_429_without_usable_retry_after(
    rsps: responses.RequestsMock, client: ApprovalClient, header: dict[str, str]
) -> None:
    """A 429 with no (or an unusable) Retry-After is transient with retry_after None."""
    rsps.post(SUBMIT_URL, status=429, headers=header)

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 429
    assert caught.value.retry_after is None


def test_submit_409_key_in_progress_is_transient(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A 409 to submit (an earlier request with this Idempotency-Key still running) is retried."""
    rsps.post(SUBMIT_URL, status=409, json={"message": "request with this key in progress"})

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 409


def test_submit_connection_refused_is_transient_without_status(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A refused connection (nothing was sent) is a plain transient error with no status."""
    refused = NewConnectionError(None, "Failed to establish a new connection: [Errno 111]")  # type: ignore[arg-type]
    rsps.post(
        SUBMIT_URL,
        body=requests.ConnectionError(MaxRetryError(None, SUBMIT_URL, refused)),  # type: ignore[arg-type]
    )

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert not isinstance(caught.value, ApprovalOutcomeUnknown)
    assert caught.value.status_code is None
    assert caught.value.retry_after is None


def test_submit_connection_dropped_after_sending_has_unknown_outcome(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A connection dropped after the request went out may have submitted: unknown outcome."""
    aborted = ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer"))
    rsps.post(SUBMIT_URL, body=requests.ConnectionError(aborted))

    with pytest.raises(ApprovalOutcomeUnknown) as caught:
        client.submit(make_approval_request())

    assert isinstance(caught.value, ApprovalUnavailable)
    assert caught.value.status_code is None


def test_submit_read_timeout_has_unknown_outcome(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A submit that times out waiting for the answer may have happened: unknown outcome."""
    rsps.post(SUBMIT_URL, body=requests.ReadTimeout("read timed out"))

    with pytest.raises(ApprovalOutcomeUnknown) as caught:
        client.submit(make_approval_request())

    assert isinstance(caught.value, TransientError)
    assert caught.value.status_code is None
    assert "re-sending it is safe" in str(caught.value)


def test_submit_connect_timeout_is_transient_not_unknown(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A submit that could not even connect in time was never sent: plain transient error."""
    rsps.post(SUBMIT_URL, body=requests.ConnectTimeout("connect timed out"))

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert not isinstance(caught.value, ApprovalOutcomeUnknown)


def test_submit_answer_that_breaks_off_has_unknown_outcome() -> None:
    """A 200 whose body breaks off mid-read may have submitted: unknown outcome."""

    class BrokenRaw:
        def stream(self, *args: object, **kwargs: object) -> Iterator[bytes]:
            raise ProtocolError("Connection broken: IncompleteRead")

        def close(self) -> None:
            pass

    class BreakingSession(requests.Session):
        def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
            response = requests.Response()
            response.status_code = 200
            response.raw = BrokenRaw()
            return response

    client = ApprovalClient(BASE, session=BreakingSession())

    with pytest.raises(ApprovalOutcomeUnknown) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 200


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_submit_4xx_is_deterministic_with_a_short_detail(
    rsps: responses.RequestsMock, client: ApprovalClient, status: int
) -> None:
    """A 4xx answer to submit cannot succeed by retrying: CannotProceed with status and detail."""
    rsps.post(SUBMIT_URL, status=status, json={"message": "title is required", "code": "E1"})

    with pytest.raises(ApprovalCallFailed) as caught:
        client.submit(make_approval_request())

    assert isinstance(caught.value, CannotProceed)
    assert not isinstance(caught.value, TransientError)
    assert caught.value.status_code == status
    assert caught.value.detail == "title is required"
    assert f"HTTP {status}: title is required" in str(caught.value)


def test_submit_huge_error_body_is_capped_in_the_detail(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A huge (HTML) error page is cut to a short single-line detail, never kept whole."""
    page = "<html>\n<body>" + "bad request " * 50_000 + "</body></html>"
    rsps.post(SUBMIT_URL, status=400, body=page)

    with pytest.raises(ApprovalCallFailed) as caught:
        client.submit(make_approval_request())

    assert len(caught.value.detail) <= MAX_DETAIL_CHARS
    assert "\n" not in caught.value.detail
    assert len(str(caught.value)) < MAX_DETAIL_CHARS + 100


@pytest.mark.parametrize(
    "answer",
    [b"", b"<html>ok</html>", b"[]", b'{"id": "apr-1"}', b'{"approval_id": ""}', b"[" * 50_000],
)
def test_submit_2xx_without_a_usable_approval_id_is_deterministic(
    rsps: responses.RequestsMock, client: ApprovalClient, answer: bytes
) -> None:
    """A 2xx answer with no usable approval_id is a contract problem: CannotProceed, not a crash."""
    rsps.post(SUBMIT_URL, body=answer, status=200)

    with pytest.raises(ApprovalCallFailed) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 200


def test_submit_redirect_is_not_followed(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A redirect is reported (fix the configured URL) instead of silently re-sent elsewhere."""
    rsps.post(SUBMIT_URL, status=302, headers={"Location": "https://elsewhere.example.com/"})

    with pytest.raises(ApprovalCallFailed) as caught:
        client.submit(make_approval_request())

    assert caught.value.status_code == 302
    assert len(rsps.calls) == 1


def test_submit_without_a_configured_url_fails_without_a_call() -> None:
    """An unset GITOPS_APPROVAL_URL is a deterministic failure naming the setting."""
    with pytest.raises(ApprovalCallFailed, match="GITOPS_APPROVAL_URL"):
        ApprovalClient("").submit(make_approval_request())


def test_errors_never_show_credentials_from_the_url(rsps: responses.RequestsMock) -> None:
    """A URL with credentials in it never reaches an error message."""
    client = ApprovalClient("https://bot:hunter2@approvals.example.com")
    rsps.post(
        "https://bot:hunter2@approvals.example.com/approvals",
        body=requests.ConnectionError("HTTPSConnectionPool(host='bot:hunter2@...')"),
    )

    with pytest.raises(ApprovalUnavailable) as caught:
        client.submit(make_approval_request())

    assert "hunter2" not in str(caught.value)


# --- withdraw ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 202, 204, 404, 409, 410])
def test_withdraw_is_done_when_withdrawn_decided_or_gone(
    rsps: responses.RequestsMock, client: ApprovalClient, status: int
) -> None:
    """Withdraw succeeds on 2xx and also when there is nothing left to withdraw (404/409/410)."""
    rsps.post(f"{BASE}/approvals/apr-1/withdraw", status=status)

    client.withdraw("apr-1")


def test_withdraw_quotes_the_approval_id_into_one_path_segment(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """An approval id with a slash cannot reach another path of the approval system."""
    rsps.post(f"{BASE}/approvals/a%2F..%2Fadmin/withdraw", status=204)

    client.withdraw("a/../admin")


def test_withdraw_5xx_is_transient(rsps: responses.RequestsMock, client: ApprovalClient) -> None:
    """A 5xx answer to withdraw is a transient error with its status."""
    rsps.post(f"{BASE}/approvals/apr-1/withdraw", status=503, headers={"Retry-After": "5"})

    with pytest.raises(ApprovalUnavailable) as caught:
        client.withdraw("apr-1")

    assert (caught.value.status_code, caught.value.retry_after) == (503, 5.0)


def test_withdraw_timeout_is_transient(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A withdraw that times out is retried later (withdrawing twice is harmless)."""
    rsps.post(f"{BASE}/approvals/apr-1/withdraw", body=requests.ReadTimeout())

    with pytest.raises(ApprovalUnavailable):
        client.withdraw("apr-1")


def test_withdraw_400_is_deterministic(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A 400 answer to withdraw is a deterministic failure with its status."""
    rsps.post(f"{BASE}/approvals/apr-1/withdraw", status=400, body="bad id")

    with pytest.raises(ApprovalCallFailed) as caught:
        client.withdraw("apr-1")

    assert (caught.value.status_code, caught.value.detail) == (400, "bad id")


# --- status ------------------------------------------------------------------------------------


@pytest.mark.parametrize("decision", list(Decision))
def test_status_returns_each_decision(
    rsps: responses.RequestsMock, client: ApprovalClient, decision: Decision
) -> None:
    """Status reads every decision the approval system can report, pending included."""
    rsps.get(f"{BASE}/approvals/apr-1", json={"approval_id": "apr-1", "decision": decision.value})

    assert client.status("apr-1") is decision


@pytest.mark.parametrize(
    "answer",
    [
        {"approval_id": "apr-1", "decision": "expired"},
        {"approval_id": "apr-1", "decision": ["approved"]},
        {"approval_id": "apr-1"},
        {"approval_id": "apr-2", "decision": "approved"},
    ],
)
def test_status_unusable_answer_is_deterministic(
    rsps: responses.RequestsMock, client: ApprovalClient, answer: dict[str, Any]
) -> None:
    """A status answer with an unknown decision or about another approval is not guessed at."""
    rsps.get(f"{BASE}/approvals/apr-1", json=answer)

    with pytest.raises(ApprovalCallFailed):
        client.status("apr-1")


def test_status_404_is_not_found(rsps: responses.RequestsMock, client: ApprovalClient) -> None:
    """A status call for an approval the system does not know raises ApprovalNotFound."""
    rsps.get(f"{BASE}/approvals/apr-1", status=404, json={"error": {"message": "no such id"}})

    with pytest.raises(ApprovalNotFound) as caught:
        client.status("apr-1")

    assert (caught.value.status_code, caught.value.detail) == (404, "no such id")


def test_status_timeout_is_transient_not_unknown(
    rsps: responses.RequestsMock, client: ApprovalClient
) -> None:
    """A status read that times out is a plain transient error (a read changes nothing)."""
    rsps.get(f"{BASE}/approvals/apr-1", body=requests.ReadTimeout())

    with pytest.raises(ApprovalUnavailable) as caught:
        client.status("apr-1")

    assert not isinstance(caught.value, ApprovalOutcomeUnknown)


# --- the request, the errors, the decisions, backoff --------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"operation_id": " "},
        {"mr_iid": 0, "project": "p"},
        {"mr_iid": True, "project": "p"},
        {"mr_iid": 7},
    ],
)
def test_approval_request_refuses_impossible_values(kw: dict[str, Any]) -> None:
    """An approval request without an operation id, or with a bad or project-less MR iid, fails."""
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies per field
        make_approval_request(**kw)


def test_client_refuses_a_relative_url() -> None:
    """A base URL that is not absolute http(s) is a configuration error at construction."""
    with pytest.raises(ValueError, match="absolute"):
        ApprovalClient("approvals.example.com")


@pytest.mark.parametrize(
    "error",
    [
        ApprovalUnavailable("down", status_code=503, retry_after=5.0),
        ApprovalOutcomeUnknown("no answer"),
        ApprovalCallFailed("refused", status_code=422, detail="title is required"),
        ApprovalNotFound("gone", status_code=404, detail="no such id"),
    ],
)
def test_errors_survive_pickling(error: Exception) -> None:
    """Errors keep their message and fields through pickle (job queues store them)."""
    copy = pickle.loads(pickle.dumps(error))

    assert (type(copy), str(copy), vars(copy)) == (type(error), str(error), vars(error))


def test_decisions_map_to_events() -> None:
    """Each final decision fires its event; pending fires none."""
    assert {d: d.event for d in Decision} == {
        Decision.PENDING: None,
        Decision.APPROVED: Event.APPROVED,
        Decision.REJECTED: Event.REJECTED,
        Decision.WITHDRAWN: Event.WITHDRAWN,
    }


def test_backoff_doubles_from_base_up_to_the_cap() -> None:
    """Backoff doubles per attempt from the base and stops at the cap."""
    assert [backoff(n) for n in range(10)] == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert backoff(3, base=1.0, cap=5.0) == 5.0


def test_backoff_treats_a_negative_attempt_as_the_first() -> None:
    """A negative attempt number is treated as attempt 0."""
    assert backoff(-3) == backoff(0) == 2.0


@given(st.integers(min_value=-(10**6), max_value=10**12))
def test_backoff_stays_between_zero_and_the_cap_without_overflow(attempt: int) -> None:
    """Backoff never overflows and never leaves [base, cap], whatever the attempt number."""
    assert 2.0 <= backoff(attempt) <= 300.0
    assert backoff(attempt) <= backoff(attempt + 1)
