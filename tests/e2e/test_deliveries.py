"""Duplicate, late and out-of-order deliveries: no duplicate effect and no wrong transition."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from bot.core.states import BindingState as S
from bot.core.states import Flow
from sim.relay import Sent
from tests.e2e.cluster import wait_until
from tests.e2e.world import BOT_HOOK, ONE_EACH, PATHS, SECRETS, World

pytestmark = pytest.mark.e2e


def to_bot(world: World) -> list[Sent]:
    """The webhook POSTs the relay made to the bot's web instances."""
    return [sent for sent in world.relay.sent if sent.url.endswith("/webhooks/gitlab")]


def test_approval_callback_before_sent_counts_once(world: World) -> None:
    """The decision arrives while the submit call is still open: approved once, never SENT."""
    world.approvals.decide_after = None
    world.approvals.hold_submits()
    op_id = world.submit(Flow.APPROVE_FIRST)
    wait_until(world.approvals.held_now, 30, "the submit to be held")
    assert world.state(op_id) is S.APPROVAL_SENDING
    assert world.approvals.decide(op_id, "approved") in (200, 202)
    world.wait_state(op_id, S.MR_CREATING)
    world.approvals.release()  # the submit's answer comes back after the decision
    world.wait_state(op_id, S.VALIDATED)
    world.wait_ui(op_id)
    path = world.transitions(op_id)
    assert path[:2] == [
        (None, "APPROVAL_SENDING", "submit"),
        ("APPROVAL_SENDING", "MR_CREATING", "approved"),
    ]
    assert path[2:] == PATHS[Flow.APPROVE_FIRST][3:], world.describe(op_id)
    assert world.effects(op_id) == ONE_EACH


def test_replays_for_an_old_operation_after_reapply_are_ignored(world: World) -> None:
    """After a re-apply, the old operation's callbacks (same and new ids) move nothing."""
    old = world.submit(Flow.APPROVE_FIRST, subject="svc-replay")
    world.wait_state(old, S.VALIDATED)
    old_path = world.transitions(old)
    old_callback = next(s for s in world.approvals.sent if s.operation_id == old)
    old_mr = world.op(old)["mr_iid"]

    world.approvals.decide_after = None
    new = world.submit(Flow.APPROVE_FIRST, subject="svc-replay", content="replicas: 5\n")
    world.wait_state(new, S.APPROVAL_SENT)
    replays = [
        world.callback_body(old, "approved", old_callback.request_id),  # the very same delivery
        world.callback_body(old, "approved"),  # the old decision sent again as a new event
        world.callback_body(old, "rejected"),  # and a contrary one
    ]
    answers = [world.post_approval(body, web=n % 2) for n, body in enumerate(replays)]
    deploy = json.dumps({"project_id": world.op(old)["project_id"], "mr_iid": old_mr})
    answers.append(
        requests.post(
            f"{world.web[1]}/webhooks/deploy",
            data=deploy[:-1] + ', "status": "success"}',
            headers={"X-Deploy-Token": SECRETS["deploy"], "Content-Type": "application/json"},
            timeout=10,
        ).status_code
    )
    assert all(200 <= code < 300 for code in answers), answers
    world.wait_inbox_done()
    assert world.state(new) is S.APPROVAL_SENT
    assert world.transitions(old) == old_path

    world.approvals.decide(new, "approved")
    world.wait_state(new, S.VALIDATED)
    world.wait_ui(new)
    reapplied = [("VALIDATED", "APPROVAL_SENDING", "submit"), *PATHS[Flow.APPROVE_FIRST][1:]]
    assert world.transitions(new) == reapplied, world.describe(new)
    assert world.effects(new) == ONE_EACH
    assert world.deployed_rows(old) == world.deployed_rows(new) == 1


def test_late_gitlab_webhooks_change_nothing(world: World) -> None:
    """GitLab's webhooks to the bot are held until the change is in effect, then all arrive."""
    world.relay.pause(BOT_HOOK)
    op_id = world.submit(Flow.MR_FIRST)
    world.wait_state(op_id, S.VALIDATED)  # the pipeline was found by polling
    world.wait_ui(op_id)
    path = world.transitions(op_id)
    late = world.relay.held_back()
    assert {d.kind for d in late} >= {"merge_request", "pipeline"}
    world.relay.resume()
    wait_until(lambda: len(to_bot(world)) >= len(late), 30, "the late webhooks to be sent")
    world.wait_inbox_done()
    assert world.inbox_count("gitlab") == len(late)
    assert world.transitions(op_id) == path == PATHS[Flow.MR_FIRST]
    assert world.state(op_id) is S.VALIDATED
    assert world.effects(op_id) == ONE_EACH
    assert all(200 <= sent.status < 300 for sent in world.relay.sent)


def test_same_deliveries_to_two_webs_and_two_workers(world: World) -> None:
    """Every webhook and callback twice to each web instance at once: one effect each."""
    world.relay.fan_out, world.relay.copies = True, 2
    world.approvals.decide_after = None
    world.deploy.deploy_seconds = None
    ops = [world.submit(flow) for flow in (Flow.APPROVE_FIRST, Flow.MR_FIRST, Flow.APPROVE_FIRST)]
    world.wait_all(ops, S.APPROVAL_SENT)

    def everywhere(url_path: str, body: bytes, headers: dict[str, str]) -> list[int]:
        posts = [url for url in world.web for _ in range(2)]
        with ThreadPoolExecutor(len(posts)) as pool:
            return list(
                pool.map(
                    lambda url: (
                        requests.post(
                            f"{url}{url_path}", data=body, headers=headers, timeout=10
                        ).status_code
                    ),
                    posts,
                )
            )

    answers: list[int] = []
    request_ids = {op_id: uuid.uuid4().hex for op_id in ops}
    for op_id, rid in request_ids.items():
        body = world.callback_body(op_id, "approved", rid)
        answers += everywhere("/webhooks/approval", body, world.approvals.signed_headers(body))
    world.wait_all(ops, S.MERGED)
    for op_id in ops:
        op = world.op(op_id)
        body = json.dumps(
            {"project_id": op["project_id"], "mr_iid": op["mr_iid"], "status": "success"}
        ).encode()
        headers = {"X-Deploy-Token": SECRETS["deploy"], "Content-Type": "application/json"}
        answers += everywhere("/webhooks/deploy", body, headers)
    world.wait_all(ops, S.VALIDATED)
    for op_id in ops:
        world.wait_ui(op_id)
    world.wait_inbox_done()

    assert all(200 <= code < 300 for code in answers), answers

    # GitLab may still be sending the hook of the last label change (the relay posts it after the
    # MR shows the label): take the relay's record and the inbox once that delivery has landed
    def landed() -> tuple[list[Sent], list[str]] | None:
        sent = to_bot(world)
        world.wait_inbox_done()
        stored = [r["delivery_key"] for r in world.inbox_rows()]
        sent_keys = {s.idempotency_key for s in sent}
        stored_gitlab = {k for k in stored if k.startswith("gitlab:")}
        return (sent, stored) if len(sent) == 4 * len(sent_keys) == 4 * len(stored_gitlab) else None

    settled = wait_until(landed, 30, "every GitLab delivery sent four times and stored")
    assert isinstance(settled, tuple)
    sent_to_bot, keys = settled
    assert all(200 <= sent.status < 300 for sent in world.relay.sent)
    assert len(keys) == len(set(keys))
    assert {f"approval:{rid}" for rid in request_ids.values()} <= set(keys)
    gitlab_keys = {sent.idempotency_key for sent in sent_to_bot}
    assert len([k for k in keys if k.startswith("gitlab:")]) == len(gitlab_keys)
    assert len(sent_to_bot) == 4 * len(gitlab_keys)
    for op_id in ops:
        flow = Flow(world.status(op_id)["flow"])
        assert world.transitions(op_id) == PATHS[flow], world.describe(op_id)
        assert world.effects(op_id) == ONE_EACH
        assert world.deployed_rows(op_id) == 1
