"""GET /api/v1/changes/<id>, retry, cancel and the list by state."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.errors import Conflict
from bot.store.fire import fire
from bot.store.submit import submit
from tests.api import Api, change_body
from tests.builders import binding_state, make_operation, make_request

UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def api(db: Engine) -> Api:
    """The app on the test database."""
    return Api.build(db)


def _get(api: Api, op_id: str) -> dict[str, Any]:
    response = api.call("GET", f"/api/v1/changes/{op_id}")
    assert response.status_code == 200, response.json
    assert response.json is not None
    return dict(response.json)


# -- one operation ---------------------------------------------------------------------------------


def test_fresh_request_view(api: Api) -> None:
    """A request just accepted shows its first phase, step, an in-progress hint and one entry."""
    accepted = api.submit(change_body(subject_id="billing")).json
    assert accepted is not None
    view = _get(api, accepted["operation_id"])
    assert view["operation_id"] == accepted["operation_id"]
    assert view["subject_id"] == "billing"
    assert view["flow"] == "approve_first"
    assert (view["phase"], view["step"], view["step_code"]) == (
        "APPROVAL_SENDING",
        "APPROVAL_SUBMITTING",
        10401,
    )
    assert view["hint"]["kind"] == "in_progress"
    assert view["mr_url"] is None
    [entry] = view["history"]
    assert {k: v for k, v in entry.items() if k != "at"} == {
        "from": None,
        "to": "APPROVAL_SENDING",
        "event": "submit",
        "step": "APPROVAL_SUBMITTING",
        "step_code": 10401,
        "source": "api",
        "actor": "alice via GITOPS_API_TOKEN",  # the client that spoke for alice
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["at"])


def test_failed_view_tells_to_contact_the_maintainers(api: Api) -> None:
    """A creation failure shows CREATE_FAILED, a failed hint and the path that led there."""
    op_id = make_operation(api.engine, S.CREATE_FAILED)
    view = _get(api, op_id)
    assert (view["phase"], view["step"]) == ("CREATE_FAILED", "CREATE_FAILED")
    assert view["hint"]["kind"] == "failed"
    assert "contact the maintainers" in view["hint"]["text"]
    assert [h["to"] for h in view["history"]] == [
        "APPROVAL_SENDING",
        "APPROVAL_SENT",
        "MR_CREATING",
        "CREATE_FAILED",
    ]
    assert view["history"][-1]["event"] == "create_error"


def test_pending_view_says_you_can_keep_waiting(api: Api) -> None:
    """A check pipeline past its timeout is pending, not failed: "you can keep waiting"."""
    op_id = make_operation(api.engine, S.MR_CREATING)
    fire(api.engine, TransitionRequest(op_id, E.PIPELINE_TIMED_OUT))
    view = _get(api, op_id)
    assert (view["phase"], view["step"]) == ("MR_CREATING", "CREATE_PIPELINE_PENDING")
    assert view["hint"]["kind"] == "pending"
    assert "you can keep waiting" in view["hint"]["text"]


def test_replaced_operation_keeps_its_final_phase(api: Api) -> None:
    """After a re-apply the old operation still shows the state it ended in, not the new one's."""
    old = make_operation(api.engine, S.REJECTED, subject_id="svc", target_key="cfg")
    new = submit(api.engine, make_request(subject_id="svc", target_key="cfg")).operation_id
    assert binding_state(api.engine, old) is S.APPROVAL_SENDING  # the binding moved on
    view = _get(api, old)
    assert (view["phase"], view["step"]) == ("REJECTED", "CLOSE_REJECTED")
    assert view["hint"]["kind"] == "closed"
    assert _get(api, new)["phase"] == "APPROVAL_SENDING"


@pytest.mark.parametrize("op_id", [UNKNOWN, "x" * 100, "a.b", "%00", "%E2%80%AE"])
def test_unknown_or_malformed_id_is_404(api: Api, op_id: str) -> None:
    """An id no operation has, or one that cannot be an id, is 404 not_found."""
    response = api.call("GET", f"/api/v1/changes/{op_id}")
    assert response.status_code == 404
    assert response.json is not None
    assert response.json["error"] == "not_found"


# -- retry and cancel ------------------------------------------------------------------------------


def test_retry_a_failure_redrives_it(api: Api) -> None:
    """Retrying CREATE_FAILED goes back to creating, is audited as the operator, and re-driven."""
    op_id = make_operation(api.engine, S.CREATE_FAILED)
    response = api.call("POST", f"/api/v1/changes/{op_id}/retry")
    assert response.status_code == 200
    view = response.json
    assert view is not None
    assert (view["phase"], view["step"]) == ("MR_CREATING", "CREATE_STARTED")
    last = view["history"][-1]
    # the shared token acts as the admin client GITOPS_API_TOKEN, which the audit log names
    assert (last["event"], last["source"], last["actor"]) == (
        "retry",
        "operator",
        "GITOPS_API_TOKEN",
    )
    assert api.queue.drives() == [op_id]


def test_retry_of_a_finished_change_is_409(api: Api) -> None:
    """A validated change cannot be retried: 409 illegal_transition, nothing enqueued."""
    op_id = make_operation(api.engine, S.VALIDATED)
    response = api.call("POST", f"/api/v1/changes/{op_id}/retry")
    assert response.status_code == 409
    assert response.json is not None
    assert response.json["error"] == "illegal_transition"
    assert api.queue.enqueued == []


def test_cancel_closes_the_request(api: Api) -> None:
    """Cancelling a request being merged closes it with step CLOSE_CANCELLED."""
    op_id = make_operation(api.engine, S.MERGING)
    response = api.call("POST", f"/api/v1/changes/{op_id}/cancel")
    assert response.status_code == 200
    view = response.json
    assert view is not None
    assert (view["phase"], view["step"]) == ("CLOSED", "CLOSE_CANCELLED")
    assert view["hint"]["kind"] == "closed"
    assert "cancelled" in view["hint"]["text"]
    assert view["mr_url"].endswith("/merge_requests/7")
    assert api.queue.enqueued == []


def test_cancel_after_merge_is_409(api: Api) -> None:
    """A merged change cannot be cancelled (only reverted): 409 illegal_transition."""
    op_id = make_operation(api.engine, S.MERGED)
    response = api.call("POST", f"/api/v1/changes/{op_id}/cancel")
    assert response.status_code == 409
    assert response.json is not None
    assert response.json["error"] == "illegal_transition"
    assert binding_state(api.engine, op_id) is S.MERGED


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_actions_on_a_replaced_operation_are_stale(api: Api, action: str) -> None:
    """Retry or cancel of an operation replaced by a re-apply is 409 stale_operation."""
    old = make_operation(api.engine, S.CLOSED, subject_id="svc", target_key="cfg")
    submit(api.engine, make_request(subject_id="svc", target_key="cfg"))
    response = api.call("POST", f"/api/v1/changes/{old}/{action}")
    assert response.status_code == 409
    assert response.json is not None
    assert response.json["error"] == "stale_operation"


@pytest.mark.parametrize("action", ["retry", "cancel"])
@pytest.mark.parametrize("op_id", [UNKNOWN, "no.such"])
def test_actions_on_an_unknown_operation_are_404(api: Api, action: str, op_id: str) -> None:
    """Retry or cancel of an id no operation has is 404."""
    response = api.call("POST", f"/api/v1/changes/{op_id}/{action}")
    assert response.status_code == 404


def test_a_lasting_conflict_is_409_after_retries(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """When every attempt loses the compare-and-set race the answer is 409 conflict."""
    from bot.app import operator

    op_id = make_operation(api.engine, S.CREATE_FAILED)
    attempts: list[str] = []

    def racing(engine: Any, request: TransitionRequest, **kw: Any) -> Any:
        attempts.append(request.operation_id)
        raise Conflict("moved under us")

    monkeypatch.setattr(operator, "fire", racing)
    response = api.call("POST", f"/api/v1/changes/{op_id}/retry")
    assert response.status_code == 409
    assert response.json is not None
    assert response.json["error"] == "conflict"
    assert attempts == [op_id] * 3


# -- the list --------------------------------------------------------------------------------------


def _list(api: Api, query: str) -> list[dict[str, Any]]:
    response = api.call("GET", f"/api/v1/changes{query}")
    assert response.status_code == 200, response.json
    assert response.json is not None
    return list(response.json["changes"])


def test_list_by_state_newest_first_without_history(api: Api) -> None:
    """Filtering by one or more states lists current operations, newest first, no history."""
    sending = make_operation(api.engine, S.APPROVAL_SENDING)
    failed = make_operation(api.engine, S.CREATE_FAILED)
    merging = make_operation(api.engine, S.MERGING)
    assert [c["operation_id"] for c in _list(api, "?state=CREATE_FAILED")] == [failed]
    both = _list(api, "?state=CREATE_FAILED&state=MERGING")
    assert [c["operation_id"] for c in both] == [merging, failed]
    assert [c["operation_id"] for c in _list(api, "?state=MERGING,APPROVAL_SENDING")] == [
        merging,
        sending,
    ]
    assert all("history" not in c for c in both)
    assert both[0]["phase"] == "MERGING"
    assert both[0]["hint"]["kind"] == "in_progress"


def test_list_leaves_out_replaced_operations(api: Api) -> None:
    """Only the operation that owns a binding is listed; the one it replaced is not."""
    old = make_operation(api.engine, S.REJECTED, subject_id="svc", target_key="cfg")
    new = submit(api.engine, make_request(subject_id="svc", target_key="cfg")).operation_id
    ids = [c["operation_id"] for c in _list(api, "")]
    assert new in ids
    assert old not in ids
    assert _list(api, "?state=REJECTED") == []


def test_list_limit(api: Api) -> None:
    """`limit` caps the list to the newest operations."""
    make_operation(api.engine, S.MERGING)
    newest = make_operation(api.engine, S.MERGING)
    assert [c["operation_id"] for c in _list(api, "?state=MERGING&limit=1")] == [newest]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?state=DONE", "state"),
        ("?state=MERGING&state=nope", "state"),
        ("?state=", "state"),
        ("?state=MERGING,", "state"),
        ("?state=MERGING&state=", "state"),
        ("?limit=0", "limit"),
        ("?limit=501", "limit"),
        ("?limit=ten", "limit"),
        ("?limit=%C2%B2", "limit"),
        ("?limit=-1", "limit"),
    ],
)
def test_bad_list_queries_are_422(api: Api, query: str, field: str) -> None:
    """An unknown or empty state (as the document's enum says) or a limit outside 1..500 is 422
    invalid naming the parameter."""
    response = api.call("GET", f"/api/v1/changes{query}")
    assert response.status_code == 422
    assert response.json is not None
    assert (response.json["error"], response.json["field"]) == ("invalid", field)


def test_step_codes_match_their_names(api: Api) -> None:
    """The view's step_code is the Step's number for the name it shows."""
    op_id = make_operation(api.engine, S.MERGING)
    view = _get(api, op_id)
    assert Step[view["step"]].value == view["step_code"]
    assert all(Step[h["step"]].value == h["step_code"] for h in view["history"])
