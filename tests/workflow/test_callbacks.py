"""Completion callbacks end to end: a change driven through, its phases POSTed to a fake receiver
(through `responses`), signed, in order, once each, through a receiver outage and never past a
redirect; none when none was asked for."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
from prometheus_client import REGISTRY
from redis import Redis
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from bot.app.outbox import REFUSALS_MAX
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.fire import write_audit_and_outbox
from bot.store.fire_sql import Write
from bot.store.models import AUDIT, OUTBOX, utcnow
from bot.store.outbox import retry_dead
from jobs.outbox import dispatch
from tests.workflow.harness import PROJECT, Bot

HOOK = "https://hooks.example.com/gitops?token=portal-own-token"
SECRET = "callback-secret"
README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_verifier() -> Callable[..., bool]:
    """The receivers' verification snippet, taken from the README's "Completion callbacks"."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Completion callbacks") :]
    section = section[: section.index("\n## ", 1)]
    snippet = re.search(r"```python\n(.*?)```", section, re.S)
    assert snippet is not None
    namespace: dict[str, Any] = {}
    exec(snippet.group(1), namespace)  # the README's own code, as a receiver would paste it
    verifier: Callable[..., bool] = namespace["verify_gitops_callback"]
    return verifier


verify_gitops_callback = _readme_verifier()


@dataclass
class Call:
    """One POST the receiver got, and what it answered."""

    headers: Any
    body: bytes
    status: int

    @property
    def json(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


@dataclass
class Receiver:
    """A portal's callback endpoint: answers from `answers` first (a status, or an exception
    to raise as the connection failing), then 204."""

    answers: list[int | Exception] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def __call__(self, request: Any) -> tuple[int, dict[str, str], str]:
        answer = self.answers.pop(0) if self.answers else 204
        if isinstance(answer, Exception):
            self.calls.append(Call(request.headers, request.body, 0))
            raise answer
        self.calls.append(Call(request.headers, request.body, answer))
        headers = {"Location": "https://evil.example/steal"} if 300 <= answer < 400 else {}
        return answer, headers, "the receiver's own words, never logged"

    def accepted(self) -> list[dict[str, Any]]:
        """The bodies answered 2xx, in order."""
        return [c.json for c in self.calls if 200 <= c.status < 300]


@dataclass
class Hooked:
    bot: Bot
    receiver: Receiver
    evil: list[Any]


@pytest.fixture
def hooked(db: Engine, redis: Redis) -> Iterator[Hooked]:
    """The bot allowed to call back hooks.example.com, with the receiver mounted there."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        bot = Bot(db, redis, rsps, callback_hosts=("hooks.example.com",), callback_secret=SECRET)
        receiver = Receiver()
        evil: list[Any] = []
        rsps.add_callback(
            responses.POST, re.compile(r"https://hooks\.example\.com/gitops.*"), callback=receiver
        )
        rsps.add_callback(
            responses.POST,
            re.compile(r"https://evil\.example/.*"),
            callback=lambda r: (evil.append(r), (200, {}, ""))[1],
        )
        rsps.add_callback(
            responses.GET,
            re.compile(r"https://evil\.example/.*"),
            callback=lambda r: (evil.append(r), (200, {}, ""))[1],
        )
        yield Hooked(bot, receiver, evil)
        bot.close()


def drain(at: datetime | None = None) -> None:
    """Dispatches the outbox at `at` until nothing due is left to claim."""
    for _ in range(40):
        if dispatch(now=at or utcnow()).claimed == 0:
            return
    raise AssertionError("the outbox did not drain")


def phase_changes(engine: Engine, op_id: str) -> list[str]:
    """The states the operation entered, in order, as its audit log says."""
    query = select(AUDIT.c.from_state, AUDIT.c.to_state).where(AUDIT.c.operation_id == op_id)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(AUDIT.c.id)).all()
    return [r.to_state for r in rows if r.to_state != r.from_state]


def callbacks_total(outcome: str) -> float:
    return REGISTRY.get_sample_value("gitops_callbacks_total", {"outcome": outcome}) or 0.0


def to_validated(bot: Bot, op_id: str, between: Callable[[], None] = lambda: None) -> None:
    """Drives an approve-first change to VALIDATED, calling `between` after each step."""
    bot.settle()
    between()
    assert bot.approve(op_id) == 202
    bot.settle()
    between()
    bot.pass_pipeline(op_id)
    bot.settle()
    between()
    assert bot.deployed(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED


def test_callbacks_arrive_signed_in_phase_order(hooked: Hooked) -> None:
    """Every phase of a change reaches the receiver once, in order, verifiable with the secret
    by the README's snippet, carrying its delivery id in the header and the body."""
    bot, receiver = hooked.bot, hooked.receiver
    op_id = bot.request(Flow.APPROVE_FIRST, callback_url=HOOK)
    to_validated(bot, op_id, between=drain)
    drain()
    phases = phase_changes(bot.services.engine, op_id)
    assert phases[-1] == S.VALIDATED
    assert len(phases) >= 5
    got = receiver.accepted()
    assert [b["phase"] for b in got] == phases
    assert [b["previous_phase"] for b in got] == [None, *phases[:-1]]
    for call in receiver.calls:
        assert verify_gitops_callback(SECRET, call.headers, call.body)
        assert not verify_gitops_callback("another-secret", call.headers, call.body)
        assert not verify_gitops_callback(SECRET, call.headers, call.body + b" ")
        body = call.json
        assert call.headers["X-Gitops-Delivery"] == body["delivery_id"]
        assert body["delivery_id"] == f"{op_id}:{body['phase']}"
        assert body["operation_id"] == op_id
        assert body["change"]["project"] == PROJECT
        assert body["change"]["target_branch"] == "main"
    last = got[-1]
    assert (last["phase"], last["state"]) == ("VALIDATED", "done")
    assert last["change"]["mr_url"]


def test_callbacks_survive_the_receiver_being_down(hooked: Hooked) -> None:
    """A receiver down for hours (5xx, no answer, 429) gets every phase once it is back, in
    order; while the first failed, no later phase was tried."""
    bot, receiver = hooked.bot, hooked.receiver
    receiver.answers = [503, requests.ConnectionError("down"), 429, 502]
    failed_before = callbacks_total("failed")
    op_id = bot.request(Flow.APPROVE_FIRST, callback_url=HOOK)
    bot.settle()
    assert bot.approve(op_id) == 202
    bot.settle()  # several phase changes are waiting now
    at = utcnow()
    for _ in range(6):  # an outage of hours: each try after its back-off
        drain(at)
        at += timedelta(hours=1)
    phases = phase_changes(bot.services.engine, op_id)
    assert [b["phase"] for b in receiver.accepted()] == phases
    first = f"{op_id}:{phases[0]}"
    assert [c.headers["X-Gitops-Delivery"] for c in receiver.calls[:5]] == [first] * 5
    assert callbacks_total("failed") - failed_before == 4


def test_once_per_phase_when_the_transition_or_the_send_is_repeated(hooked: Hooked) -> None:
    """A transition written twice enqueues one callback; a send repeated after a lost mark
    carries the same delivery id, so a de-duplicating receiver sees each phase once."""
    bot, receiver = hooked.bot, hooked.receiver
    engine = bot.services.engine
    op_id = bot.request(Flow.APPROVE_FIRST, callback_url=HOOK)
    bot.settle()
    phases = phase_changes(engine, op_id)
    again = Write(
        operation_id=op_id,
        binding_id=0,
        binding_version=0,
        version=0,
        from_state=phases[0],
        to_state=phases[1],
        event="approval_sent",
        step=1,
        changes={},
        effects=[],
        source="api",
        actor=None,
        correlation_id=None,
        detail="the same transition's writes once more",
        now=utcnow(),
    )
    with engine.begin() as conn:
        write_audit_and_outbox(conn, again, 99)
    drain()
    # the dispatcher died after the receiver answered, before it marked the row sent
    with engine.begin() as conn:
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.dedupe_key == f"{op_id}:{phases[1]}")
            .values(sent_at=None, next_attempt_at=utcnow())
        )
    drain()
    with engine.connect() as conn:
        keys = conn.execute(
            select(OUTBOX.c.dedupe_key).where(OUTBOX.c.effect == "callback")
        ).scalars()
        assert sorted(keys) == sorted(f"{op_id}:{p}" for p in phases)
    ids = [c.headers["X-Gitops-Delivery"] for c in receiver.calls]
    assert len(ids) == len(phases) + 1  # the one repeat, with the same id
    assert list(dict.fromkeys(ids)) == [f"{op_id}:{p}" for p in phases]


def test_a_redirect_is_not_followed_and_the_callback_dies_visibly(hooked: Hooked) -> None:
    """A 302 is a refusal: never followed, dead after its tries, shown on the dashboard as a
    callback to its host (no path, no query), counted; the later phases wait until an operator
    retries it, then go in order."""
    bot, receiver = hooked.bot, hooked.receiver
    receiver.answers = [302] * REFUSALS_MAX
    dead_before = callbacks_total("dead")
    op_id = bot.request(Flow.APPROVE_FIRST, callback_url=HOOK)
    bot.settle()
    at = utcnow()
    for _ in range(REFUSALS_MAX + 1):
        drain(at)
        at += timedelta(hours=1)
    assert hooked.evil == []
    assert len(receiver.calls) == REFUSALS_MAX
    assert receiver.accepted() == []
    assert callbacks_total("dead") - dead_before == 1
    html = bot.client.get("/", headers={"Authorization": "Bearer api-token"}).get_data(True)
    section = html[html.index('<section id="outbox">') :]
    assert "<code>callback</code>" in section
    assert "→ hooks.example.com" in section
    assert "redirects are not followed" in section
    assert "portal-own-token" not in html
    assert SECRET not in html
    retried = retry_dead(bot.services.engine, None, at, "ops", "cli")
    assert [r.effect for r in retried] == ["callback"]
    drain(at)
    assert [b["phase"] for b in receiver.accepted()] == phase_changes(bot.services.engine, op_id)


def test_no_callback_when_none_was_asked(hooked: Hooked) -> None:
    """A change submitted without callback_url writes no callback row and calls nobody."""
    bot, receiver = hooked.bot, hooked.receiver
    op_id = bot.request(Flow.APPROVE_FIRST)
    to_validated(bot, op_id, between=drain)
    drain()
    assert receiver.calls == []
    with bot.services.engine.connect() as conn:
        rows = conn.execute(select(OUTBOX.c.id).where(OUTBOX.c.effect == "callback")).all()
    assert rows == []
