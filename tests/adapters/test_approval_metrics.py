"""gitops_approval_calls_total: every call to the approval system counted by how it ended, so an
alert sees the approval system failing (deploy/prometheus/alerts.yml)."""

from __future__ import annotations

import pytest
import requests
import responses
from prometheus_client import REGISTRY

from bot.approval import ApprovalCallFailed, ApprovalClient, ApprovalNotFound, ApprovalUnavailable
from tests.adapters.test_approval_client import BASE, SUBMIT_URL, make_approval_request


def calls(call: str, outcome: str) -> float:
    """The counter's value for one call and outcome."""
    labels = {"call": call, "outcome": outcome}
    return REGISTRY.get_sample_value("gitops_approval_calls_total", labels) or 0.0


@pytest.mark.parametrize(
    ("status", "body", "outcome", "error"),
    [
        (201, {"approval_id": "apr-1"}, "ok", None),
        (503, {"message": "maintenance"}, "unavailable", ApprovalUnavailable),
        (422, {"message": "no such approver"}, "refused", ApprovalCallFailed),
    ],
)
def test_a_submit_is_counted_by_how_it_ended(
    status: int, body: dict[str, str], outcome: str, error: type[Exception] | None
) -> None:
    """An accepted submit counts ok, a 503 unavailable, a 422 refused: one each."""
    before = calls("submit", outcome)
    client = ApprovalClient(BASE)
    with responses.RequestsMock() as rsps:
        rsps.add(responses.POST, SUBMIT_URL, json=body, status=status)
        if error is None:
            client.submit(make_approval_request())
        else:
            with pytest.raises(error):
                client.submit(make_approval_request())
    assert calls("submit", outcome) == before + 1


def test_a_write_without_an_answer_is_unknown_and_a_404_status_read_is_not_found() -> None:
    """A withdraw that timed out counts unknown; a status read of an id it does not know counts
    not_found (an answer, not a failure of the approval system)."""
    unknown, missing = calls("withdraw", "unknown"), calls("status", "not_found")
    client = ApprovalClient(BASE)
    with responses.RequestsMock() as rsps:
        rsps.add(
            responses.POST, f"{BASE}/approvals/apr-9/withdraw", body=requests.ReadTimeout("slow")
        )
        rsps.add(responses.GET, f"{BASE}/approvals/apr-9", json={}, status=404)
        with pytest.raises(ApprovalUnavailable):
            client.withdraw("apr-9")
        with pytest.raises(ApprovalNotFound):
            client.status("apr-9")
    assert calls("withdraw", "unknown") == unknown + 1
    assert calls("status", "not_found") == missing + 1
