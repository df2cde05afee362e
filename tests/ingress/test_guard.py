"""The callback guard: only the operation that owns the binding, waiting for the event, moves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import responses
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from sqlalchemy import select

from bot.approval import ApprovalClient
from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.gitlab import Account, ApproveComponent, make_client
from bot.services import Clients, Services
from bot.store.fire import fire
from bot.store.models import AUDIT, OUTBOX
from bot.store.submit import submit
from jobs import context
from jobs import inbox as inbox_job
from tests.builders import binding_state, make_operation, make_request, operation
from tests.ingress.conftest import DEPLOY_SECRET, fixture_body, gitlab_headers
from tests.ingress.test_callbacks import approval_callback, signed


@pytest.fixture(autouse=True)
def jobs_use(services: Services) -> Iterator[None]:
    """Jobs run on the test's services."""
    context.install(services)
    yield
    context.uninstall()


def run_queued(services: Services) -> list[str]:
    """Runs every queued inbox job once (burst mode); the statuses they marked."""
    done = []
    while services.queue.enqueued:
        func, args, _ = services.queue.enqueued.pop(0)
        if func == "jobs.inbox.process":
            done.append(inbox_job.process(int(args[0])))  # type: ignore[call-overload]
    return done


def send_approval(client: FlaskClient, op_id: str, request_id: str, **kw: object) -> None:
    """Posts a signed approval callback for `op_id`."""
    body = approval_callback(request_id=request_id, operation_id=op_id, **kw)
    assert client.post("/webhooks/approval", data=body, headers=signed(body)).status_code in (
        200,
        202,
    )


def stale_rows(services: Services, op_id: str) -> list[str]:
    """The stale reasons recorded for an operation."""
    with services.engine.connect() as conn:
        return [
            d
            for d in conn.execute(
                select(AUDIT.c.detail).where(AUDIT.c.operation_id == op_id, AUDIT.c.version == 0)
            ).scalars()
        ]


def validated_total() -> float:
    """The validated counter."""
    return REGISTRY.get_sample_value("gitops_validated_total") or 0.0


def test_callback_before_sent_is_accepted(client: FlaskClient, services: Services) -> None:
    """The approval can arrive while we are still SENDING; it counts, and drives the next step."""
    op_id = make_operation(services.engine, S.APPROVAL_SENDING)
    send_approval(client, op_id, "r1")
    assert run_queued_keep_drive(services) == ["processed"]
    assert binding_state(services.engine, op_id) is S.MR_CREATING
    assert operation(services.engine, op_id)["approval_id"] == "apr-1"
    assert ("jobs.drive.drive", (op_id,), f"drive:{op_id}") in services.queue.enqueued


def run_queued_keep_drive(services: Services) -> list[str]:
    """Runs the queued inbox jobs and leaves the drive jobs they enqueued in the queue."""
    inbox_jobs = [j for j in services.queue.enqueued if j[0] == "jobs.inbox.process"]
    services.queue.enqueued = [j for j in services.queue.enqueued if j[0] != "jobs.inbox.process"]
    return [inbox_job.process(int(args[0])) for _, args, _ in inbox_jobs]  # type: ignore[call-overload]


def test_duplicates_count_once(client: FlaskClient, services: Services) -> None:
    """The same decision delivered three times (three request ids) moves the operation once."""
    op_id = make_operation(services.engine, S.APPROVAL_SENT)
    for n in range(3):
        send_approval(client, op_id, f"r{n}")
    assert run_queued(services) == ["processed", "stale", "stale"]
    assert operation(services.engine, op_id)["version"] == 3
    assert len(stale_rows(services, op_id)) == 2


def test_replay_for_an_old_operation_after_reapply_is_stale(
    client: FlaskClient, services: Services
) -> None:
    """After a re-apply the old operation's approval finds no owner; the new one is untouched."""
    old = make_operation(services.engine, S.REJECTED)
    row = operation(services.engine, old)
    new = submit(
        services.engine, make_request(subject_id=row["subject_id"], target_key=row["target_key"])
    ).operation_id
    fire(services.engine, TransitionRequest(new, E.APPROVAL_SUBMITTED))
    send_approval(client, old, "late-one")
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, new) is S.APPROVAL_SENT
    assert "re-apply" in stale_rows(services, old)[0]


def test_unknown_operation_is_stale(client: FlaskClient, services: Services) -> None:
    """A callback for an operation nobody knows is acknowledged and recorded as stale."""
    send_approval(client, "00000000-0000-0000-0000-000000000000", "r1")
    assert run_queued(services) == ["stale"]


def test_the_payload_shape_must_match_the_flow(client: FlaskClient, services: Services) -> None:
    """An approval carrying ext.mrId (MR-first) cannot move an approve-first operation."""
    op_id = make_operation(services.engine, S.APPROVAL_SENT, flow=Flow.APPROVE_FIRST)
    send_approval(client, op_id, "r1", ext={"mrId": 7, "project": "p"})
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, op_id) is S.APPROVAL_SENT


def test_mr_first_rejection_closes_the_bots_mr(client: FlaskClient, services: Services) -> None:
    """A rejection of an MR-first request ends it REJECTED and queues closing the bot's MR."""
    op_id = make_operation(services.engine, S.APPROVAL_SENT, flow=Flow.MR_FIRST)
    send_approval(client, op_id, "r1", decision="rejected", ext={"mrId": 7, "project": "p"})
    assert run_queued(services) == ["processed"]
    assert binding_state(services.engine, op_id) is S.REJECTED
    with services.engine.connect() as conn:
        effects = set(
            conn.execute(select(OUTBOX.c.effect).where(OUTBOX.c.operation_id == op_id)).scalars()
        )
    assert "close_mr" in effects


def pipeline_body(op: dict[str, object], status: str, sha: str) -> bytes:
    """An MR pipeline event for the operation's MR."""
    data = json.loads(fixture_body("pipeline.json"))
    data["project"]["id"] = op["project_id"]
    data["merge_request"]["iid"] = op["mr_iid"]
    data["object_attributes"].update(status=status, sha=sha, id=99)
    return json.dumps(data).encode()


def mr_waiting_for_pipeline(services: Services) -> dict[str, object]:
    """An operation whose MR was just opened (head abc) and waits for its pipeline."""
    op_id = make_operation(services.engine, S.MR_CREATING, flow=Flow.MR_FIRST)
    fire(
        services.engine,
        TransitionRequest(
            op_id,
            E.MR_OPENED,
            changes={"mr_iid": 7, "project_id": 14, "head_sha": "abc", "mr_opened_by_bot": True},
        ),
    )
    return operation(services.engine, op_id)


@pytest.mark.parametrize(
    ("status", "state"), [("success", S.MR_CREATED), ("failed", S.CREATE_FAILED)]
)
def test_pipeline_event_moves_the_waiting_owner(
    client: FlaskClient, services: Services, status: str, state: S
) -> None:
    """The awaited pipeline's result passes or fails the wait."""
    op = mr_waiting_for_pipeline(services)
    client.post(
        "/webhooks/gitlab",
        data=pipeline_body(op, status, "abc"),
        headers=gitlab_headers("Pipeline Hook", key=f"p-{status}"),
    )
    assert run_queued(services) == ["processed"]
    assert binding_state(services.engine, str(op["id"])) is state


def gitlab_says_head(services: Services, rsps: responses.RequestsMock, sha: str) -> None:
    """GitLab (through `responses`) answers the MR read with head `sha`; the services get an
    author account to read it with."""
    url = services.settings.gitlab_url
    rsps.add(
        responses.GET,
        re.compile(rf"{re.escape(url)}/api/v4/projects/14/merge_requests/7\b.*"),
        json={"iid": 7, "project_id": 14, "state": "opened", "sha": sha},
    )
    services.clients = Clients(
        author=Account(make_client(url, "author-token"), "author"),
        approvers=[],
        approve=ApproveComponent(),
        approval=ApprovalClient("https://approvals.example.com"),
    )


def test_pipeline_for_an_older_commit_or_not_final_changes_nothing(
    client: FlaskClient, services: Services
) -> None:
    """A pipeline on another SHA is stale; a running one is not final; neither moves."""
    op = mr_waiting_for_pipeline(services)
    with responses.RequestsMock() as rsps:  # the MR's head as GitLab says it now: abc
        gitlab_says_head(services, rsps, "abc")
        # "old" is no merge-ref commit built from abc (a merged results pipeline's would be)
        rsps.add(
            responses.GET,
            re.compile(r".*/api/v4/projects/14/repository/commits/old$"),
            json={"id": "old", "parent_ids": ["older"]},
        )
        send_older_and_running(client, op)
        assert run_queued(services) == ["stale", "stale"]
    assert operation(services.engine, str(op["id"]))["step"] == Step.CREATE_SUCCEEDED
    assert "older commit" in stale_rows(services, str(op["id"]))[0]


def send_older_and_running(client: FlaskClient, op: dict[str, object]) -> None:
    """A failed pipeline on commit "old", and a running one on the MR's head "abc"."""
    client.post(
        "/webhooks/gitlab",
        data=pipeline_body(op, "failed", "old"),
        headers=gitlab_headers("Pipeline Hook", key="p1"),
    )
    client.post(
        "/webhooks/gitlab",
        data=pipeline_body(op, "running", "abc"),
        headers=gitlab_headers("Pipeline Hook", key="p2"),
    )


def test_deploy_callback_validates_once(client: FlaskClient, services: Services) -> None:
    """A deploy callback validates the merged change; a second one counts nothing more."""
    op_id = make_operation(services.engine, S.MERGED)
    op = operation(services.engine, op_id)
    before = validated_total()
    for status in ("success", "success"):
        body = json.dumps(
            {"project_id": op["project"], "mr_iid": op["mr_iid"], "status": status, "sha": "b" * 40}
        ).encode()
        client.post("/webhooks/deploy", data=body, headers={"X-Deploy-Token": DEPLOY_SECRET})
    assert run_queued(services) == ["processed"]  # the second body is a duplicate delivery
    body = json.dumps(
        {
            "project_id": op["project"],
            "mr_iid": op["mr_iid"],
            "status": "success",
            "operation_id": op_id,
        }
    ).encode()
    client.post("/webhooks/deploy", data=body, headers={"X-Deploy-Token": DEPLOY_SECRET})
    assert run_queued(services) == ["stale"]
    assert binding_state(services.engine, op_id) is S.VALIDATED
    assert validated_total() == before + 1


def test_mr_merged_by_gitlab_moves_a_merging_owner(client: FlaskClient, services: Services) -> None:
    """GitLab's merge event for the owner's MR records the merge and its commit."""
    op_id = make_operation(services.engine, S.MERGING)
    op = operation(services.engine, op_id)
    fire(services.engine, TransitionRequest(op_id, E.APPROVALS_GIVEN, changes={"project_id": 14}))
    data = json.loads(fixture_body("merge_request.json"))
    data["object_attributes"].update(
        iid=op["mr_iid"],
        action="merge",
        state="merged",
        merge_commit_sha="c" * 40,
        target_project_id=14,
    )
    client.post(
        "/webhooks/gitlab",
        data=json.dumps(data).encode(),
        headers=gitlab_headers("Merge Request Hook", key="m1"),
    )
    assert run_queued(services) == ["processed"]
    assert binding_state(services.engine, op_id) is S.MERGED
    assert operation(services.engine, op_id)["merge_commit_sha"] == "c" * 40
