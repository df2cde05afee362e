"""Group commit on the ack path: deliveries arriving together share one commit and one job,
and each is still answered only for its own stored row."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import fakeredis
import pytest
from flask import Flask
from rq import Queue
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from bot.app.events import inbox as inbox_app
from bot.ingress import inbox
from bot.ingress.group import DeliveryAck, GroupCommit
from bot.ingress.inbox import Delivery
from bot.services import Services
from bot.store.models import INBOX
from jobs import context
from jobs import inbox as inbox_job
from jobs.queue import RQWorkQueue
from tests.api import FakeQueue
from tests.ingress.conftest import fixture_body, gitlab_headers
from webhooks.ingest import group_of

DEADLINE = 30.0


def delivery(key: str | None = None, status: str = "received") -> Delivery:
    """A GitLab delivery with its own key (or the one given)."""
    return Delivery(
        "gitlab", f"gitlab:{key or uuid.uuid4().hex}", "Merge Request Hook", b"{}", {}, status
    )


def poll(check: Callable[[], bool], what: str) -> None:
    """Returns once `check()` holds; fails after DEADLINE seconds (threads of this process
    make progress meanwhile: the look is repeated, with a yield of the GIL between looks)."""
    deadline = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        threading.Event().wait(0.001)


def inbox_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(INBOX)).scalar_one())


@pytest.fixture
def group(services: Services) -> GroupCommit:
    return GroupCommit(lambda: services.engine, lambda: services.queue)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch, group: GroupCommit) -> list[int]:
    """The first batch's commit waits until five more deliveries are waiting behind it; the
    sizes of the batches stored are recorded."""
    real = inbox.store_many
    sizes: list[int] = []

    def store_many(engine: Engine, deliveries: list[Delivery]) -> list[inbox.StoredDelivery]:
        sizes.append(len(deliveries))
        if len(sizes) == 1:
            poll(lambda: len(group._pending) == 5, "five deliveries behind the first")
        return real(engine, deliveries)

    monkeypatch.setattr(inbox, "store_many", store_many)
    return sizes


def submit_all(group: GroupCommit, deliveries: list[Delivery]) -> list[DeliveryAck | Exception]:
    """Submits each delivery from its own thread, the first one first; the results in order."""
    results: list[DeliveryAck | Exception] = [RuntimeError("not answered")] * len(deliveries)

    def one(index: int) -> None:
        try:
            results[index] = group.submit(deliveries[index])
        except Exception as exc:  # noqa: BLE001 - the test compares what each thread got
            results[index] = exc

    first = threading.Thread(target=one, args=(0,))
    first.start()
    poll(lambda: group._leading, "the first delivery to lead")
    rest = [threading.Thread(target=one, args=(i,)) for i in range(1, len(deliveries))]
    for thread in rest:
        thread.start()
    for thread in [first, *rest]:
        thread.join(DEADLINE)
        assert not thread.is_alive(), "a delivery was never answered"
    return results


def test_deliveries_waiting_behind_a_commit_share_the_next_one(
    services: Services, group: GroupCommit, held: list[int]
) -> None:
    """Six deliveries, five arriving during the first commit: two commits, two jobs, every
    delivery answered with its own new row."""
    deliveries = [delivery() for _ in range(6)]
    results = submit_all(group, deliveries)
    assert held == [1, 5]
    assert all(
        isinstance(r, DeliveryAck) and not r.stored.duplicate and r.enqueued for r in results
    )
    ids = [r.stored.inbox_id for r in results if isinstance(r, DeliveryAck)]
    assert len(set(ids)) == 6
    with services.engine.connect() as conn:
        stored = dict(conn.execute(select(INBOX.c.id, INBOX.c.delivery_key)).all())
    assert {stored[i] for i in ids if i is not None} == {d.delivery_key for d in deliveries}
    assert isinstance(services.queue, FakeQueue)
    jobs = services.queue.enqueued
    assert [(name, len(args)) for name, args, _ in jobs] == [
        ("jobs.inbox.process", 1),
        ("jobs.inbox.process", 5),
    ]
    assert sorted(i for _, args, _ in jobs for i in args) == sorted(ids)  # type: ignore[type-var]


def test_the_same_key_twice_in_one_batch_is_stored_once(
    services: Services, group: GroupCommit, held: list[int]
) -> None:
    """A delivery GitLab sent twice, both copies in one commit: one row, one new, one duplicate;
    a quarantined delivery is stored but not enqueued."""
    twin = uuid.uuid4().hex
    deliveries = [
        delivery(),
        delivery(twin),
        delivery(twin),
        delivery(status="quarantined"),
        delivery(),
        delivery(),
    ]
    results = submit_all(group, deliveries)
    assert held == [1, 5]
    acked = [r for r in results if isinstance(r, DeliveryAck)]
    assert len(acked) == 6
    assert [a.stored.duplicate for a in acked] == [False, False, True, False, False, False]
    assert inbox_rows(services.engine) == 5
    assert isinstance(services.queue, FakeQueue)
    enqueued = sorted(i for _, args, _ in services.queue.enqueued for i in args)  # type: ignore[type-var]
    expected = [acked[i].stored.inbox_id for i in (0, 1, 4, 5)]
    assert enqueued == sorted(expected)  # type: ignore[type-var]


def test_a_failed_commit_reaches_every_delivery_in_it(
    monkeypatch: pytest.MonkeyPatch, services: Services, group: GroupCommit
) -> None:
    """The database refuses the batch: each waiting request gets the error (and falls back on
    its own), nothing is enqueued, and the next delivery leads a fresh commit."""
    release = threading.Event()
    real = inbox.store_many

    def failing(engine: Engine, deliveries: list[Delivery]) -> list[inbox.StoredDelivery]:
        if not release.is_set():
            poll(lambda: len(group._pending) == 3, "three deliveries behind the first")
            release.set()
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        if len(deliveries) > 1:
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        return real(engine, deliveries)

    monkeypatch.setattr(inbox, "store_many", failing)
    results = submit_all(group, [delivery() for _ in range(4)])
    assert all(isinstance(r, OperationalError) for r in results)
    assert isinstance(services.queue, FakeQueue)
    assert services.queue.enqueued == []
    later = group.submit(delivery())
    assert not later.stored.duplicate
    assert not group._leading
    assert inbox_rows(services.engine) == 1


def test_queue_down_still_stores_and_says_so(services: Services, group: GroupCommit) -> None:
    """Redis down: the row is committed, and the answer says the sweep must enqueue it."""
    assert isinstance(services.queue, FakeQueue)
    services.queue.down = True
    acked = group.submit(delivery())
    assert acked.stored.inbox_id is not None
    assert not acked.enqueued
    assert inbox_rows(services.engine) == 1


def test_concurrent_webhooks_are_each_stored_once_and_enqueued_once(
    app: Flask, services: Services
) -> None:
    """Forty GitLab deliveries posted at once from forty connections: forty 202s, forty rows,
    and the jobs enqueued name each row exactly once (however the commits were grouped)."""
    body = fixture_body("merge_request.json")
    headers = gitlab_headers("Merge Request Hook")
    statuses: list[int] = []

    def post() -> None:
        with app.test_client() as client:
            response = client.post(
                "/webhooks/gitlab",
                data=body,
                headers={**headers, "Idempotency-Key": uuid.uuid4().hex},
            )
            statuses.append(response.status_code)

    threads = [threading.Thread(target=post) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert statuses == [202] * 40
    with services.engine.connect() as conn:
        ids = sorted(conn.execute(select(INBOX.c.id)).scalars())
    assert len(ids) == 40
    assert isinstance(services.queue, FakeQueue)
    enqueued = [i for _, args, _ in services.queue.enqueued for i in args]
    assert sorted(enqueued) == ids  # type: ignore[type-var]
    group = group_of(app)
    assert group.deliveries == 40
    assert 1 <= group.batches <= 40


def test_a_job_of_several_rows_handles_each_even_when_one_fails(
    monkeypatch: pytest.MonkeyPatch, services: Services
) -> None:
    """`jobs.inbox.process(a, b, c)` with b failing: a and c are handled, then b's error is
    raised (the job shows as failed; b is still "received", so the sweep enqueues it again)."""
    handled: list[int] = []

    def one(_: Any, inbox_id: int) -> str:
        if inbox_id == 2:
            raise OperationalError("SELECT", {}, Exception("connection reset"))
        handled.append(inbox_id)
        return "processed"

    monkeypatch.setattr(inbox_app, "_process_one", one)
    context.install(services)
    try:
        with pytest.raises(OperationalError):
            inbox_job.process(1, 2, 3)
        assert handled == [1, 3]
        assert inbox_job.process(4, 5) == "processed,processed"
    finally:
        context.uninstall()


def test_a_plain_job_reaches_rq_in_one_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job without an id is enqueued with the queue registered (workers find it), in one
    pipeline instead of RQ's two."""
    redis = fakeredis.FakeRedis()
    work = RQWorkQueue(redis)
    executed: list[int] = []
    real_pipeline = redis.pipeline

    def counting_pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = real_pipeline(*args, **kwargs)
        real_execute = pipe.execute

        def execute(*a: Any, **kw: Any) -> Any:
            executed.append(1)
            return real_execute(*a, **kw)

        pipe.execute = execute  # type: ignore[method-assign]
        return pipe

    monkeypatch.setattr(redis, "pipeline", counting_pipeline)
    work.enqueue("jobs.inbox.process", 7, 8)
    assert executed == [1]
    [queue] = Queue.all(connection=redis)
    [job] = queue.get_jobs()
    assert (job.func_name, job.args) == ("jobs.inbox.process", (7, 8))
