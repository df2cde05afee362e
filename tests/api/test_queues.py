"""The merge queue through the API: a change's `queue`, GET /api/v1/queues, and promote."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.store import queue as line
from bot.store.fire import fire
from bot.store.models import AUDIT
from bot.store.submit import submit
from tests.api import Api
from tests.builders import OUTBOX, count, make_operation, make_request, merge_line
from webhooks.openapi import schemas

UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def api(db: Engine) -> Api:
    """The app on the test database."""
    return Api.build(db)


def body(api: Api, method: str, path: str, status: int = 200) -> dict[str, Any]:
    """The JSON answer to one authenticated request, which must have `status`."""
    response = api.call(method, path)
    assert response.status_code == status, response.json
    assert response.json is not None
    return dict(response.json)


def queue_of(api: Api, op_id: str) -> Any:
    """The change's `queue` as GET /api/v1/changes/<id> shows it."""
    return body(api, "GET", f"/api/v1/changes/{op_id}")["queue"]


def documented(schema: str) -> set[str]:
    """The required fields of one of the OpenAPI document's schemas."""
    return set(schemas()[schema]["required"])


# -- a change's place ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [S.APPROVAL_SENT, S.MR_CREATED, S.MERGED, S.HANDLE_FAILED])
def test_a_change_that_is_not_merging_has_no_queue(api: Api, state: S) -> None:
    """Before MERGING and after it, `queue` is null."""
    assert queue_of(api, make_operation(api.engine, state)) is None


def test_each_merging_change_shows_its_place(api: Api) -> None:
    """Position, size, whether it merges next and whether it is paused on its pipeline."""
    first, second, third = merge_line(api.engine, 3)
    fire(api.engine, TransitionRequest(first, E.PIPELINE_TIMED_OUT))

    places = [queue_of(api, op_id) for op_id in (first, second, third)]

    assert places == [
        {"target_branch": "main", "position": 1, "size": 3, "head": False, "paused": True},
        {"target_branch": "main", "position": 2, "size": 3, "head": True, "paused": False},
        {"target_branch": "main", "position": 3, "size": 3, "head": False, "paused": False},
    ]
    assert set(places[0]) == documented("QueuePlace")


# -- the lines -------------------------------------------------------------------------------------


def test_queues_lists_every_line_head_first(api: Api) -> None:
    """One entry per project and branch: the change that merges next and each change."""
    assert body(api, "GET", "/api/v1/queues") == {"queues": []}
    first, second = merge_line(api.engine, 2)
    [other] = merge_line(api.engine, 1, first_mr=201, target_branch="release/1.x")
    fire(api.engine, TransitionRequest(first, E.PIPELINE_TIMED_OUT))

    queues = body(api, "GET", "/api/v1/queues")["queues"]

    assert [(q["project"], q["target_branch"], q["head"]) for q in queues] == [
        ("platform/config", "main", second),
        ("platform/config", "release/1.x", other),
    ]
    main = queues[0]["changes"]
    assert [(c["position"], c["operation_id"], c["mr_iid"], c["paused"]) for c in main] == [
        (1, first, 101, True),
        (2, second, 102, False),
    ]
    assert main[0]["step"] == "HANDLE_PIPELINE_PENDING"
    assert set(queues[0]) == documented("Queue")
    assert set(main[0]) == documented("QueuedChange")


def test_queues_need_the_token(api: Api) -> None:
    """Like the other lists: no token, 401."""
    merge_line(api.engine, 1)
    response = api.call("GET", "/api/v1/queues", token=None)
    assert response.status_code == 401
    assert response.json == {
        "error": "unauthorized",
        "detail": "missing, wrong or revoked bearer token",
    }


# -- promote ---------------------------------------------------------------------------------------


def test_promote_moves_the_change_to_the_front_and_drives_it(api: Api) -> None:
    """200 with the change's new place; the line reordered, the drive job queued, the
    promotion audited as the API's operator."""
    first, second, third = merge_line(api.engine, 3)

    view = body(api, "POST", f"/api/v1/changes/{third}/promote")

    assert view["operation_id"] == third
    assert view["phase"] == "MERGING"
    assert view["queue"] == {
        "target_branch": "main",
        "position": 1,
        "size": 3,
        "head": True,
        "paused": False,
    }
    assert [e.operation_id for e in line.line(api.engine, "platform/config", "main")] == [
        third,
        first,
        second,
    ]
    assert api.queue.drives() == [third]
    last = view["history"][-1]
    # the shared token acts as the admin client GITOPS_API_TOKEN, which the audit log names
    assert (last["event"], last["source"], last["actor"]) == (
        "promote",
        "operator",
        "GITOPS_API_TOKEN",
    )
    assert queue_of(api, first)["position"] == 2


@pytest.mark.parametrize("state", [S.APPROVAL_SENT, S.VALIDATED])
def test_promote_of_a_change_in_no_queue_is_409(api: Api, state: S) -> None:
    """`not_queued`, saying where it stands; nothing recorded, nothing driven."""
    op_id = make_operation(api.engine, state)
    rows, outbox = count(api.engine, AUDIT, op_id), count(api.engine, OUTBOX, op_id)

    refused = body(api, "POST", f"/api/v1/changes/{op_id}/promote", 409)

    assert refused["error"] == "not_queued"
    assert refused["detail"].startswith(f"it is {state.value} (")
    assert "only a MERGING change waits in a merge queue" in refused["detail"]
    assert (count(api.engine, AUDIT, op_id), count(api.engine, OUTBOX, op_id)) == (rows, outbox)
    assert api.queue.drives() == []


def test_promote_of_an_unknown_or_replaced_change(api: Api) -> None:
    """Unknown or malformed id: 404 `not_found`; replaced by a newer request: 409
    `stale_operation`; no token: 401. None of them moves the line."""
    waiting = merge_line(api.engine, 2)
    old = make_operation(api.engine, S.REJECTED, subject_id="svc-again")
    submit(api.engine, make_request(subject_id="svc-again"))

    assert body(api, "POST", f"/api/v1/changes/{UNKNOWN}/promote", 404)["error"] == "not_found"
    assert body(api, "POST", "/api/v1/changes/a.b/promote", 404)["error"] == "not_found"
    assert body(api, "POST", f"/api/v1/changes/{old}/promote", 409)["error"] == "stale_operation"
    anonymous = api.call("POST", f"/api/v1/changes/{waiting[1]}/promote", token=None)
    assert anonymous.status_code == 401
    assert [e.operation_id for e in line.line(api.engine, "platform/config", "main")] == waiting
    with api.engine.connect() as conn:
        promotions = conn.execute(select(AUDIT.c.id).where(AUDIT.c.event == "promote")).all()
    assert promotions == []
