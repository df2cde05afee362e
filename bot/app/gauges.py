"""The gauges of the database's state, made at scrape time by one collector.

Every scrape of `/metrics` builds a `DatabaseCollector` on the app's engine and asks it once: four
queries (bot/store/gauges.py), fresh metric families each time, so no label lingers from an
earlier scrape and two scrapes at once (gunicorn's threads) share nothing. What the workers count
as it happens (transitions, outbox sends, webhook-to-transition latency) stays in the process's
default registry; what describes the database is read from it here, whichever process answers.

A database that fails the reads leaves these gauges out of the scrape (the counters still answer;
`/readyz` says what failed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from bot.core.states import IN_FLIGHT
from bot.store.engine import Engine
from bot.store.gauges import STUCK_GRACE, DatabaseGauges, read_gauges
from bot.store.models import utcnow

#: Every metric the collector makes (tests and the alert rules' check read this).
NAMES = (
    "gitops_changes",
    "gitops_oldest_change_age_seconds",
    "gitops_changes_past_deadline",
    "gitops_outbox_pending",
    "gitops_outbox_oldest_pending_age_seconds",
    "gitops_outbox_dead_rows",
    "gitops_inbox_backlog",
    "gitops_inbox_quarantined",
    "gitops_last_sweep_timestamp_seconds",
    "gitops_hooks_disabled",
    "gitops_branch_protection_missing",
)


class DatabaseCollector(Collector):
    """The database's gauges, read once per collect()."""

    def __init__(self, engine: Engine, clock: Callable[[], datetime] = utcnow) -> None:
        self.engine = engine
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        found = read_gauges(self.engine, now)
        if found is None:
            return
        yield from _changes(found, now)
        yield from _outbox(found, now)
        yield from _inbox(found)
        yield from _sweep_and_hooks(found)


def exposition(engine: Engine, clock: Callable[[], datetime] = utcnow) -> bytes:
    """The database's gauges in Prometheus's text format (appended to the process's own)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(engine, clock))
    return generate_latest(registry)


def _changes(found: DatabaseGauges, now: datetime) -> Iterator[Metric]:
    changes = GaugeMetricFamily(
        "gitops_changes",
        "Changes not finished, by phase (the binding state the API shows) and step; terminal "
        "ones (VALIDATED, REJECTED, CLOSED) are not counted.",
        labels=["phase", "step"],
    )
    oldest = GaugeMetricFamily(
        "gitops_oldest_change_age_seconds",
        "Seconds since the longest-staying unfinished change entered its phase, by phase.",
        labels=["phase"],
    )
    stuck = GaugeMetricFamily(
        "gitops_changes_past_deadline",
        "Changes in flight whose deadline passed more than "
        f"{int(STUCK_GRACE.total_seconds())} s ago (the sweep has not moved them), by phase.",
        labels=["phase"],
    )
    since: dict[str, datetime] = {}
    late: dict[str, int] = {}
    for group in found.changes:
        changes.add_metric([group.state, group.step.name], group.count)
        since[group.state] = min(since.get(group.state, group.since), group.since)
        late[group.state] = late.get(group.state, 0) + group.past_deadline
    for state, when in sorted(since.items()):
        oldest.add_metric([state], max(0.0, (now - when).total_seconds()))
        if state in IN_FLIGHT:
            stuck.add_metric([state], late[state])
    yield from (changes, oldest, stuck)


def _outbox(found: DatabaseGauges, now: datetime) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "gitops_outbox_pending",
        "Outbox rows still to be performed (dead ones are in gitops_outbox_dead_rows).",
        value=found.outbox_pending,
    )
    age = 0.0 if found.outbox_oldest is None else (now - found.outbox_oldest).total_seconds()
    yield GaugeMetricFamily(
        "gitops_outbox_oldest_pending_age_seconds",
        "Seconds since the oldest outbox row still to be performed was written (0: none).",
        value=max(0.0, age),
    )
    # a gauge, not only the counter gitops_outbox_dead_total: it falls when an operator retries
    # or drops a dead row, so `gitops_outbox_dead_rows > 0` is an alert that lasts exactly as
    # long as someone has to act
    yield GaugeMetricFamily(
        "gitops_outbox_dead_rows",
        "Outbox rows dead now, waiting for an operator (gitops-bot outbox retry|drop).",
        value=found.outbox_dead,
    )


def _inbox(found: DatabaseGauges) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "gitops_inbox_backlog", "Deliveries stored but not processed yet.", found.inbox_backlog
    )
    yield GaugeMetricFamily(
        "gitops_inbox_quarantined",
        "Deliveries quarantined: authenticated but unusable, or out of processing attempts "
        "(kept, never processed).",
        value=found.inbox_quarantined,
    )


def _sweep_and_hooks(found: DatabaseGauges) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "gitops_last_sweep_timestamp_seconds",
        "When the sweep last ran to its end, in seconds since the epoch (0: never).",
        value=0.0 if found.last_sweep is None else found.last_sweep.timestamp(),
    )
    report = found.hooks
    yield GaugeMetricFamily(
        "gitops_hooks_disabled",
        "Webhooks GitLab has disabled on the managed projects, as of the last hooks check.",
        value=0 if report is None else len(report.disabled),
    )
    missing = GaugeMetricFamily(
        "gitops_branch_protection_missing",
        "1 when the bot's branches (gitops/*) are not protected as `gitops-bot hooks install` "
        "sets them in a managed project (missing or wrong), 0 when they are; as of the last "
        "hooks check.",
        labels=["project"],
    )
    if report is not None:
        for project in report.projects:
            if project not in report.errors:
                missing.add_metric([project], 1 if project in report.unprotected else 0)
    yield missing
