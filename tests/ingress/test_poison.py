"""Poison deliveries end: out-of-range ids are quarantined, and a stored delivery that fails
processing (by raising, or by killing its worker) every time is quarantined after
GITOPS_INBOX_MAX_ATTEMPTS attempts, counted, and never enqueued again by the sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from sqlalchemy import select

from bot.app.events import inbox as inbox_app
from bot.app.sweep import run_sweep
from bot.ingress import inbox
from bot.ingress.inbox import Delivery
from bot.services import Services
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from bot.store.models import INBOX, utcnow
from jobs import context
from jobs import inbox as inbox_job
from tests.ingress.conftest import DEPLOY_SECRET, fixture_body, gitlab_headers

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def jobs_use(services: Services) -> Iterator[None]:
    """Jobs run on the test's services."""
    context.install(services)
    yield
    context.uninstall()


def row(services: Services, inbox_id: int) -> Any:
    """The inbox row."""
    with services.engine.connect() as conn:
        return conn.execute(select(INBOX).where(INBOX.c.id == inbox_id)).one()


def inbox_rows(services: Services) -> list[Any]:
    """Every inbox row."""
    with services.engine.connect() as conn:
        return list(conn.execute(select(INBOX).order_by(INBOX.c.id)))


def poison_total(source: str) -> float:
    """gitops_inbox_poison_total for a source."""
    return REGISTRY.get_sample_value("gitops_inbox_poison_total", {"source": source}) or 0.0


def store_received(services: Services, body: bytes, key: str = "k1", **kw: Any) -> int:
    """A delivery stored as the ack path stores a usable one, a minute ago; its inbox id."""
    delivery = Delivery(
        kw.get("source", "gitlab"), key, kw.get("event_type", "Merge Request Hook"), body
    )
    stored = inbox.store(services.engine, delivery, utcnow() - timedelta(minutes=1))
    assert stored.inbox_id is not None
    return stored.inbox_id


def requeued(services: Services) -> list[object]:
    """The inbox ids the queue got since the last look (and forgets them)."""
    ids = [args[0] for func, args, _ in services.queue.enqueued if func == "jobs.inbox.process"]
    services.queue.enqueued.clear()
    return ids


def mr_body(**attrs: object) -> bytes:
    """A documented MR hook payload with object_attributes fields replaced."""
    data = json.loads(fixture_body("merge_request.json"))
    data["object_attributes"].update(attrs)
    return json.dumps(data).encode()


@pytest.mark.parametrize("iid", [2**63, 2**31, 0, -5])
def test_out_of_range_mr_iid_is_quarantined_at_the_door(
    client: FlaskClient, services: Services, iid: int
) -> None:
    """A GitLab MR hook whose iid no database column holds is answered 200 and quarantined."""
    response = client.post(
        "/webhooks/gitlab",
        data=mr_body(iid=iid, action="merge"),
        headers=gitlab_headers("Merge Request Hook"),
    )
    assert response.status_code == 200
    assert response.get_json() == {"status": "quarantined"}
    [stored] = inbox_rows(services)
    assert stored.status == "quarantined"
    assert "object_attributes.iid: out of range" in stored.reason
    assert services.queue.enqueued == []


def test_stored_out_of_range_delivery_is_quarantined_not_an_overflow(services: Services) -> None:
    """A delivery stored before the check (iid 2**63) ends quarantined at its first processing."""
    inbox_id = store_received(services, mr_body(iid=2**63, action="merge"))
    assert inbox_job.process(inbox_id) == "quarantined"
    stored = row(services, inbox_id)
    assert stored.status == "quarantined"
    assert "out of range" in stored.reason
    run_sweep(services, utcnow())
    assert requeued(services) == []


@pytest.mark.parametrize(
    ("field", "value"), [("project_id", 2**40), ("project_id", "99999999999"), ("mr_iid", 2**31)]
)
def test_deploy_callback_with_out_of_range_ids_is_quarantined(
    client: FlaskClient, services: Services, field: str, value: object
) -> None:
    """A deploy callback naming a project id or MR iid past 32 bits is quarantined, not kept."""
    body = {"project_id": 14, "mr_iid": 7, "status": "success", field: value}
    response = client.post(
        "/webhooks/deploy", data=json.dumps(body), headers={"X-Deploy-Token": DEPLOY_SECRET}
    )
    assert response.get_json() == {"status": "quarantined"}
    [stored] = inbox_rows(services)
    assert f"{field}: out of range" in stored.reason


def test_a_delivery_whose_handler_always_raises_is_quarantined_after_max_attempts(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler that raises every time: tried 5 times (the sweep re-enqueues it between), then
    quarantined with its last error, counted, and never enqueued again."""
    calls: list[int] = []

    def broken(*args: object, **kw: object) -> None:
        calls.append(1)
        raise RuntimeError(f"handler broke on call {len(calls)}")

    monkeypatch.setattr(inbox_app, "route", broken)
    inbox_id = store_received(services, mr_body())
    before = poison_total("gitlab")
    for attempt in range(1, 5):
        with pytest.raises(RuntimeError):
            inbox_job.process(inbox_id)
        assert row(services, inbox_id).attempts == attempt
        run_sweep(services, utcnow())
        assert requeued(services) == [inbox_id]
    assert inbox_job.process(inbox_id) == "quarantined"
    stored = row(services, inbox_id)
    assert (stored.status, stored.attempts) == ("quarantined", 5)
    assert stored.reason == (
        "failed 5 processing attempts; last error: RuntimeError: handler broke on call 5"
    )
    assert poison_total("gitlab") == before + 1
    run_sweep(services, utcnow())
    assert requeued(services) == []
    assert inbox_job.process(inbox_id) == "quarantined"  # a stray job changes nothing
    assert len(calls) == 5
    assert poison_total("gitlab") == before + 1


class Killed(BaseException):
    """Stands for the worker dying mid-handler: nothing after the raise point runs."""


def test_a_delivery_that_kills_its_worker_every_time_ends(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attempt is counted before the handler runs: a worker dying in it every time still
    uses up the attempts, and the sweep quarantines the row instead of re-enqueueing it."""

    def dies(*args: object, **kw: object) -> None:
        raise Killed

    monkeypatch.setattr(inbox_app, "route", dies)
    inbox_id = store_received(services, mr_body(), source="deploy", event_type="deploy_callback")
    before = poison_total("deploy")
    for _ in range(5):
        with pytest.raises(Killed):
            inbox_job.process(inbox_id)
        run_sweep(services, utcnow())
    stored = row(services, inbox_id)
    assert stored.status == "quarantined"
    assert stored.reason == f"failed 5 processing attempts; last error: {inbox.DIED}"
    assert requeued(services) == [inbox_id] * 4  # after attempts 1-4, not after the 5th
    assert poison_total("deploy") == before + 1


def test_max_attempts_comes_from_the_settings(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GITOPS_INBOX_MAX_ATTEMPTS=2 ends a failing delivery on its second attempt."""
    services.settings = replace(services.settings, inbox_max_attempts=2)

    def broken(*args: object, **kw: object) -> None:
        raise ValueError("nope")

    monkeypatch.setattr(inbox_app, "route", broken)
    inbox_id = store_received(services, mr_body())
    with pytest.raises(ValueError, match="nope"):
        inbox_job.process(inbox_id)
    assert inbox_job.process(inbox_id) == "quarantined"
    assert (
        row(services, inbox_id).reason
        == "failed 2 processing attempts; last error: ValueError: nope"
    )


def test_a_failing_row_in_a_batch_does_not_hold_back_the_others(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One group-commit job with a failing row and a good one: only the failing row uses an
    attempt and stays to be retried; the good one is processed."""
    real_route = inbox_app.route

    def picky(
        services_: Services, source: str, event_type: str, body: bytes, key: str, *rest: Any
    ) -> Any:
        if key == "bad":
            raise RuntimeError("poison")
        return real_route(services_, source, event_type, body, key, *rest)

    monkeypatch.setattr(inbox_app, "route", picky)
    bad = store_received(services, mr_body(), key="bad")
    good = store_received(services, mr_body(), key="good")
    with pytest.raises(RuntimeError):
        inbox_job.process(bad, good)
    assert (row(services, bad).status, row(services, bad).attempts) == ("received", 1)
    assert row(services, good).status in {"processed", "stale"}


_KILLER = """
import os, signal, sys
from bot.config import Settings
from bot.services import Services
from bot.store.engine import make_engine
from bot.app.events import inbox as handling
from jobs import context, inbox
from tests.api import FakeQueue

def killed(*args, **kw):
    os.kill(os.getpid(), signal.SIGKILL)

handling.route = killed
settings = Settings(inbox_max_attempts=2)
context.install(Services(settings=settings, engine=make_engine(sys.argv[1]), queue=FakeQueue()))
inbox.process(int(sys.argv[2]))
"""


def test_a_worker_sigkilled_while_processing_uses_up_the_attempts(
    services: Services, tmp_path: Path
) -> None:
    """Real SIGKILLs: a worker process killed inside the handler twice (limit 2) leaves the
    attempts recorded, and the sweep then quarantines the delivery instead of re-enqueueing it."""
    url = f"sqlite:///{tmp_path / 'killed.sqlite3'}"
    engine = make_engine(url)
    upgrade(engine)
    services.engine = engine
    services.settings = replace(services.settings, inbox_max_attempts=2)
    inbox_id = store_received(services, mr_body())
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITOPS_")}
    for attempt in (1, 2):
        done = subprocess.run(
            [sys.executable, "-c", _KILLER, url, str(inbox_id)],
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
        stored = row(services, inbox_id)
        assert (stored.status, stored.attempts) == ("received", attempt)
    run_sweep(services, utcnow())
    stored = row(services, inbox_id)
    assert stored.status == "quarantined"
    assert stored.reason == f"failed 2 processing attempts; last error: {inbox.DIED}"
    assert requeued(services) == []
    engine.dispose()


@pytest.mark.pg
def test_workers_racing_for_one_failing_delivery_spend_each_attempt_once(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight workers taking the same always-failing delivery at once run its handler five
    times in all (the attempt count is a compare-and-set), and it is quarantined and counted
    once."""
    calls: list[int] = []

    def broken(*args: object, **kw: object) -> None:
        calls.append(1)
        raise RuntimeError("boom")

    monkeypatch.setattr(inbox_app, "route", broken)
    inbox_id = store_received(services, mr_body())
    before = poison_total("gitlab")
    start = threading.Barrier(8)
    statuses: list[str] = []

    def worker() -> None:
        start.wait()
        try:
            statuses.append(inbox_job.process(inbox_id))
        except RuntimeError:
            statuses.append("raised")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 5
    stored = row(services, inbox_id)
    assert (stored.status, stored.attempts) == ("quarantined", 5)
    assert stored.reason.startswith("failed 5 processing attempts; last error: ")
    assert poison_total("gitlab") == before + 1
    assert statuses.count("raised") <= 4


def test_an_outage_of_gitlab_spends_no_attempt(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitLab down for longer than GITOPS_INBOX_MAX_ATTEMPTS sweeps: the delivery keeps its
    attempts and is handled once GitLab answers, instead of being quarantined as poison."""
    from bot.gitlab import GitLabUnavailable

    down = True

    def flaky(*args: object, **kw: object) -> None:
        if down:
            raise GitLabUnavailable("GitLab answered 503")
        return

    monkeypatch.setattr(inbox_app, "route", flaky)
    inbox_id = store_received(services, mr_body())
    for _ in range(3 * services.settings.inbox_max_attempts):
        with pytest.raises(GitLabUnavailable):
            inbox_job.process(inbox_id)
        run_sweep(services, utcnow())
    stored = row(services, inbox_id)
    assert (stored.status, stored.attempts) == ("received", 0)
    assert "503" in stored.reason
    assert requeued(services) == [inbox_id] * (3 * services.settings.inbox_max_attempts)
    down = False
    assert inbox_job.process(inbox_id) == "ignored"
    assert row(services, inbox_id).status == "ignored"


def test_an_outage_outlasting_the_transient_window_quarantines_with_the_reason(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery whose GitLab read keeps answering 5xx is retried only for
    GITOPS_INBOX_TRANSIENT_WINDOW after it was received: then it is quarantined, saying which
    failure kept it, counted, and the sweep never enqueues it again."""
    from bot.gitlab import GitLabUnavailable

    def down(*args: object, **kw: object) -> None:
        raise GitLabUnavailable("GitLab answered 502")

    monkeypatch.setattr(inbox_app, "route", down)
    inbox_id = store_received(services, mr_body())
    with pytest.raises(GitLabUnavailable):
        inbox_job.process(inbox_id)  # inside the window: given back, retried
    assert row(services, inbox_id).status == "received"
    window = services.settings.inbox_transient_window
    with services.engine.begin() as conn:
        conn.execute(
            INBOX.update()
            .where(INBOX.c.id == inbox_id)
            .values(received_at=utcnow() - timedelta(seconds=window + 1))
        )
    before = REGISTRY.get_sample_value(
        "gitops_inbox_transient_quarantined_total", {"source": "gitlab"}
    )
    assert inbox_job.process(inbox_id) == "quarantined"
    stored = row(services, inbox_id)
    assert stored.status == "quarantined"
    assert f"still failing {window} s after it was received" in stored.reason
    assert "502" in stored.reason
    after = REGISTRY.get_sample_value(
        "gitops_inbox_transient_quarantined_total", {"source": "gitlab"}
    )
    assert (after or 0) == (before or 0) + 1
    requeued(services)
    run_sweep(services, utcnow())
    assert requeued(services) == []  # the sweep never enqueues it again
