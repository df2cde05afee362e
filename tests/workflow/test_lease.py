"""A running step's short lease: renewed by its heartbeat, found lost, and a dead worker's lease
re-driven by the next sweep long before GITOPS_STEP_TIMEOUT. Runs on SQLite and, on the server
pass, on PostgreSQL; the racing test is PostgreSQL only."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest
import responses
from sqlalchemy import update
from sqlalchemy.engine import Engine

from bot.app.steps import drive as drive_module
from bot.app.steps.lease import Lease
from bot.app.sweep import run_sweep
from bot.config import Settings
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.errors import LeaseLost
from bot.gitlab import make_client
from bot.gitlab.calls import get_json
from bot.heartbeat import beat, beating
from bot.store.models import OPERATIONS, utcnow
from bot.store.operations import load, take_lease
from tests.builders import make_operation, operation
from tests.workflow.harness import Bot

LEASE = 30.0


def ago(seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=seconds)


def test_the_lease_is_renewed_after_a_third_not_before(db: Engine) -> None:
    op_id = make_operation(db, S.MR_CREATING)
    t0 = utcnow()
    token = take_lease(db, op_id, LEASE, now=t0)
    assert token is not None
    lease = Lease(db, op_id, token, LEASE, renewed_at=t0)
    lease.beat(now=t0 + timedelta(seconds=9))
    assert lease.renewals == 0
    assert operation(db, op_id)["lease_until"].replace(tzinfo=t0.tzinfo) == t0 + timedelta(
        seconds=LEASE
    )
    lease.beat(now=t0 + timedelta(seconds=11))
    assert lease.renewals == 1
    assert operation(db, op_id)["lease_until"].replace(tzinfo=t0.tzinfo) == t0 + timedelta(
        seconds=11 + LEASE
    )
    lease.beat(now=t0 + timedelta(seconds=12))  # a third has not passed since the renewal
    assert lease.renewals == 1


def test_a_lost_lease_is_reported(db: Engine) -> None:
    op_id = make_operation(db, S.MR_CREATING)
    t0 = ago(100)
    token = take_lease(db, op_id, LEASE, now=t0)
    assert token is not None
    lease = Lease(db, op_id, token, LEASE, renewed_at=t0)
    assert take_lease(db, op_id, LEASE) is not None  # expired: another worker takes it
    with pytest.raises(LeaseLost):
        lease.beat()
    assert operation(db, op_id)["lease_owner"] != token


def test_every_gitlab_call_beats_first() -> None:
    beats: list[int] = []
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, "https://gitlab.example.com/api/v4/user", json={"id": 1})
        gl = make_client("https://gitlab.example.com", "t")
        get_json(gl, "/user", what="user")  # no step running: no heartbeat, nothing happens
        with beating(lambda: beats.append(1)):
            get_json(gl, "/user", what="user")
            beat()
    assert beats == [1, 1]


def test_the_gitlab_timeout_must_fit_in_the_lease() -> None:
    assert Settings.from_env({}).lease_seconds == 30
    assert Settings.from_env({"GITOPS_STEP_TIMEOUT": "4"}).lease_seconds == 4
    with pytest.raises(ValueError, match="two thirds of GITOPS_STEP_LEASE"):
        Settings.from_env({"GITOPS_GITLAB_TIMEOUT": "25"})


def test_a_dead_workers_operation_is_redriven_by_the_next_sweep(bot: Bot) -> None:
    """A worker took the lease and died mid-step (never released it, its job is gone): once the
    lease expires the next sweep re-drives the step, though the deadline is minutes away."""
    engine = bot.services.engine
    op_id = bot.request(Flow.MR_FIRST)
    bot.worker.queue.empty()  # the job died with its worker
    assert take_lease(engine, op_id, LEASE, now=ago(LEASE - 10)) is not None  # still live
    deadline = operation(engine, op_id)["deadline_at"]
    assert deadline is None or deadline.replace(tzinfo=utcnow().tzinfo) > utcnow() + timedelta(
        seconds=bot.settings.step_timeout / 2
    )
    assert op_id not in run_sweep(bot.services, utcnow()).redriven  # the lease is live
    assert take_lease(engine, op_id, LEASE, now=ago(LEASE + 1)) is None  # held: not stolen
    # the dead worker's lease, expired a second ago
    with engine.begin() as conn:
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == op_id).values(lease_until=ago(1)))
    report = run_sweep(bot.services, utcnow())
    assert op_id in report.redriven
    bot.settle()
    op = operation(engine, op_id)
    assert op["mr_iid"] is not None
    assert op["lease_owner"] is None
    assert bot.state(op_id) is S.MR_CREATING


def test_a_live_lease_is_not_taken_by_a_second_driver(bot: Bot) -> None:
    """While the first worker's lease is live (renewed by its beats) a second drive is busy;
    a step whose lease was taken stops at its next beat and writes nothing."""
    engine = bot.services.engine
    op_id = bot.request(Flow.MR_FIRST)
    bot.worker.queue.empty()
    t0 = ago(20)
    token = take_lease(engine, op_id, LEASE, now=t0)
    assert token is not None
    first = Lease(engine, op_id, token, LEASE, renewed_at=t0)
    first.beat()  # renewed: live for another 30 s
    assert first.renewals == 1
    assert drive_module.drive(bot.services, op_id) == "busy"
    assert op_id not in run_sweep(bot.services, utcnow()).redriven
    assert operation(engine, op_id)["mr_iid"] is None

    # the first worker stalls past its lease; a second takes it over
    stalled = Lease(engine, op_id, token, LEASE, renewed_at=ago(LEASE + 1))
    assert take_lease(engine, op_id, LEASE, now=ago(-LEASE)) is not None
    before = operation(engine, op_id)["version"]
    with beating(stalled.beat), pytest.raises(LeaseLost):
        drive_module._run(bot.services, load(engine, op_id))
    assert operation(engine, op_id)["version"] == before
    assert operation(engine, op_id)["mr_iid"] is None


@pytest.mark.pg
def test_racing_workers_take_an_expired_lease_once(db: Engine) -> None:
    """PostgreSQL: eight workers race for one expired lease and the holder's renewal; exactly
    one of them holds it afterwards (renewal and take are one conditional UPDATE each)."""
    op_id = make_operation(db, S.MR_CREATING)
    old = take_lease(db, op_id, LEASE, now=ago(LEASE + 1))
    assert old is not None
    holder = Lease(db, op_id, old, LEASE, renewed_at=ago(LEASE + 1))
    barrier = threading.Barrier(9)

    def take() -> str | None:
        barrier.wait()
        return take_lease(db, op_id, LEASE)

    def renew() -> str | None:
        barrier.wait()
        try:
            holder.beat()
        except LeaseLost:
            return None
        return old

    with ThreadPoolExecutor(9) as pool:
        futures = [pool.submit(take) for _ in range(8)] + [pool.submit(renew)]
        results = [f.result() for f in futures]
    # either the renewal came first (the old holder keeps it, every take finds it live) or one
    # take did (the renewal finds another owner): never two holders
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert operation(db, op_id)["lease_owner"] == winners[0]
