"""The gauges of the database's state as a scrape of /metrics shows them, and the latency from a
delivery's receipt to the transition it made."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine

from bot.app.events import inbox as inbox_app
from bot.app.gauges import exposition
from bot.app.sweep import run_sweep
from bot.core.states import BindingState as S
from bot.ingress import inbox
from bot.ingress.inbox import Delivery
from bot.services import Services
from bot.store.engine import make_engine
from bot.store.hooks import DisabledHook, HooksReport, save_report
from bot.store.models import BINDINGS, INBOX, OPERATIONS, OUTBOX, utcnow
from tests.builders import binding_state, make_operation
from tests.ingress.test_callbacks import approval_callback

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: FlaskClient) -> Samples:
    """Every sample of one scrape of /metrics, by name and labels."""
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.get_data(as_text=True))
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """One sample's value (None: not in the scrape)."""
    return samples.get((name, tuple(sorted(labels.items()))))


def sample(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value, which the scrape must have."""
    found = value(samples, name, **labels)
    assert found is not None, f"{name}{labels} is not in the scrape"
    return found


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def set_binding(engine: Engine, op_id: str, **values: Any) -> None:
    """Sets columns of the operation's binding that fire() does not guard (state_since...)."""
    with engine.begin() as conn:
        conn.execute(update(BINDINGS).where(BINDINGS.c.operation_id == op_id).values(**values))


def set_operation(engine: Engine, op_id: str, **values: Any) -> None:
    """Sets unguarded columns of the operation (its deadline)."""
    with engine.begin() as conn:
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == op_id).values(**values))


def test_changes_are_counted_by_phase_and_step_and_terminal_ones_are_not(
    client: FlaskClient, services: Services
) -> None:
    """Two awaiting approval, one merging, one failed, one validated: the gauge shows the first
    four by phase and step; the validated one is finished and not counted."""
    engine = services.engine
    for state in (S.APPROVAL_SENT, S.APPROVAL_SENT, S.MERGING, S.HANDLE_FAILED, S.VALIDATED):
        make_operation(engine, state)

    samples = scrape(client)

    assert value(samples, "gitops_changes", phase="APPROVAL_SENT", step="APPROVAL_SUBMITTED") == 2
    assert value(samples, "gitops_changes", phase="MERGING", step="HANDLE_STARTED") == 1
    assert value(samples, "gitops_changes", phase="HANDLE_FAILED", step="HANDLE_MERGE_FAILED") == 1
    counted = {dict(labels)["phase"] for name, labels in samples if name == "gitops_changes"}
    assert counted == {"APPROVAL_SENT", "MERGING", "HANDLE_FAILED"}


def test_oldest_age_is_per_phase_from_when_the_change_entered_it(
    client: FlaskClient, services: Services
) -> None:
    """The age of a phase is that of its longest-staying change, counted from state_since (the
    binding's last update for one from before migration 0005)."""
    engine = services.engine
    now = utcnow()
    waiting_long = make_operation(engine, S.APPROVAL_SENT)
    make_operation(engine, S.APPROVAL_SENT)
    legacy = make_operation(engine, S.MERGING)
    set_binding(engine, waiting_long, state_since=now - timedelta(hours=2))
    set_binding(engine, legacy, state_since=None, updated_at=now - timedelta(minutes=30))

    samples = scrape(client)

    sent = sample(samples, "gitops_oldest_change_age_seconds", phase="APPROVAL_SENT")
    merging = sample(samples, "gitops_oldest_change_age_seconds", phase="MERGING")
    assert 7200 <= sent < 7200 + 60
    assert 1800 <= merging < 1800 + 60
    assert value(samples, "gitops_oldest_change_age_seconds", phase="VALIDATED") is None


def test_a_change_past_its_deadline_beyond_the_grace_is_stuck(
    client: FlaskClient, services: Services
) -> None:
    """In flight with a deadline ten minutes past: stuck; one minute past (the sweep has time
    yet) or failed (an operator's, not the sweep's): not."""
    engine = services.engine
    now = utcnow()
    stuck = make_operation(engine, S.MERGING)
    recent = make_operation(engine, S.MERGING)
    failed = make_operation(engine, S.HANDLE_FAILED)
    set_operation(engine, stuck, deadline_at=now - timedelta(minutes=10))
    set_operation(engine, recent, deadline_at=now - timedelta(minutes=1))
    set_operation(engine, failed, deadline_at=now - timedelta(hours=1))

    samples = scrape(client)

    assert value(samples, "gitops_changes_past_deadline", phase="MERGING") == 1
    assert value(samples, "gitops_changes_past_deadline", phase="HANDLE_FAILED") is None


def test_outbox_pending_oldest_age_and_dead_rows(client: FlaskClient, services: Services) -> None:
    """Pending rows are counted with the age of the oldest; a dead row counts as dead, not
    pending, and its age does not count."""
    engine = services.engine
    op_id = make_operation(engine, S.MERGING)
    with engine.begin() as conn:
        ids = sorted(
            conn.execute(select(OUTBOX.c.id).where(OUTBOX.c.operation_id == op_id)).scalars()
        )
        conn.execute(update(OUTBOX).where(OUTBOX.c.id != ids[0]).values(sent_at=utcnow()))
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id == ids[0])
            .values(created_at=utcnow() - timedelta(minutes=45))
        )
    empty = scrape(client)
    make_operation(engine, S.MERGING)  # newer rows

    before = scrape(client)
    with engine.begin() as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id == ids[0]).values(dead_at=utcnow()))
    after = scrape(client)

    assert value(empty, "gitops_outbox_pending") == 1
    pending = sample(before, "gitops_outbox_pending")
    assert pending > 1
    assert 2700 <= sample(before, "gitops_outbox_oldest_pending_age_seconds") < 2700 + 60
    assert value(before, "gitops_outbox_dead_rows") == 0
    assert value(after, "gitops_outbox_pending") == pending - 1
    assert value(after, "gitops_outbox_dead_rows") == 1
    assert sample(after, "gitops_outbox_oldest_pending_age_seconds") < 60


def test_inbox_backlog_and_quarantined_deliveries(client: FlaskClient, services: Services) -> None:
    """One delivery waiting and two quarantined, whichever way they were."""
    engine = services.engine
    inbox.store(engine, Delivery("gitlab", "k-waiting", "Merge Request Hook", b"{}"))
    inbox.store(
        engine,
        Delivery("approval", "k-bad", "approval", b"{", status="quarantined", reason="bad JSON"),
    )
    spent = inbox.store(engine, Delivery("gitlab", "k-spent", "Pipeline Hook", b"{}")).inbox_id
    with engine.begin() as conn:
        conn.execute(update(INBOX).where(INBOX.c.id == spent).values(attempts=5))
    inbox.quarantine_exhausted(engine, 5)

    samples = scrape(client)

    assert value(samples, "gitops_inbox_backlog") == 1
    assert value(samples, "gitops_inbox_quarantined") == 2


def test_last_sweep_is_when_the_sweep_last_ran(client: FlaskClient, services: Services) -> None:
    """0 before any sweep; the sweep's time once one ran, read by whichever process scrapes."""
    before = scrape(client)
    swept_at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    run_sweep(services, swept_at)
    later = swept_at + timedelta(seconds=30)
    run_sweep(services, later)

    assert value(before, "gitops_last_sweep_timestamp_seconds") == 0
    assert value(scrape(client), "gitops_last_sweep_timestamp_seconds") == later.timestamp()


def test_hooks_gauges_come_from_the_stored_check(client: FlaskClient, services: Services) -> None:
    """The last hooks check, stored by the worker that ran it, is what every scrape shows."""
    report = HooksReport(checked_at=utcnow(), projects=["a/one", "b/two", "c/three"])
    report.disabled.append(
        DisabledHook("a/one", 4, "http://bot.test/webhooks/gitlab", None, None, True)
    )
    report.unprotected["a/one"] = "not protected"
    report.errors["c/three"] = "HTTP 503"
    save_report(services.engine, report)

    samples = scrape(client)

    assert value(samples, "gitops_hooks_disabled") == 1
    assert value(samples, "gitops_branch_protection_missing", project="a/one") == 1
    assert value(samples, "gitops_branch_protection_missing", project="b/two") == 0
    assert value(samples, "gitops_branch_protection_missing", project="c/three") is None


def test_a_failing_database_leaves_the_gauges_out_not_the_scrape(
    client: FlaskClient, services: Services
) -> None:
    """The database down: /metrics still answers with the process's counters, without gauges."""
    services.engine = make_engine("sqlite:////nonexistent-dir/down.sqlite3")
    samples = scrape(client)

    assert "gitops_changes_past_deadline" not in names(samples)
    assert "gitops_outbox_pending" not in names(samples)
    assert "python_gc_objects_collected_total" in names(samples)  # the process's own


@pytest.fixture
def statements(db: Engine) -> Iterator[list[str]]:
    """The queries (SELECTs) run on the database while the test looks."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        if str(args[2]).lstrip().upper().startswith("SELECT"):
            seen.append(str(args[2]))

    event.listen(db, "before_cursor_execute", record)
    yield seen
    event.remove(db, "before_cursor_execute", record)


def test_a_scrape_costs_four_queries_whatever_the_number_of_changes(
    services: Services, statements: list[str]
) -> None:
    """One change or a dozen in several phases, with outbox and inbox rows: four queries."""
    engine = services.engine
    make_operation(engine, S.MERGING)
    statements.clear()
    exposition(engine)
    few = len(statements)
    for state in (S.APPROVAL_SENT, S.MR_CREATING, S.MERGED, S.CREATE_FAILED) * 3:
        make_operation(engine, state)
    inbox.store(engine, Delivery("gitlab", "k-1", "Note Hook", b"{}"))
    statements.clear()
    exposition(engine)

    assert few == len(statements) == 4


def to_transition(source: str) -> tuple[float, float]:
    """(count, sum) of gitops_webhook_to_transition_seconds for a source."""
    labels = {"source": source}
    count = REGISTRY.get_sample_value("gitops_webhook_to_transition_seconds_count", labels)
    total = REGISTRY.get_sample_value("gitops_webhook_to_transition_seconds_sum", labels)
    return count or 0.0, total or 0.0


def test_the_latency_from_receipt_to_transition_is_observed(services: Services) -> None:
    """An approval received 7 s before it is processed moves its change: one observation of at
    least 7 s; the same decision again moves nothing and is not observed."""
    engine = services.engine
    op_id = make_operation(engine, S.APPROVAL_SENT)
    received = utcnow() - timedelta(seconds=7)
    ids = [
        inbox.store(
            engine,
            Delivery("approval", key, "approval", approval_callback(key, operation_id=op_id)),
            received,
        ).inbox_id
        for key in ("r-1", "r-2")
    ]
    count, total = to_transition("approval")

    first = inbox_app.process(services, int(ids[0] or 0))
    moved_count, moved_total = to_transition("approval")
    second = inbox_app.process(services, int(ids[1] or 0))

    assert (first, second) == ("processed", "stale")
    assert binding_state(engine, op_id) is S.MR_CREATING
    assert moved_count == count + 1
    assert 7 <= moved_total - total < 7 + 60
    assert to_transition("approval") == (moved_count, moved_total)
