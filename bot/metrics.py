"""Prometheus metrics of the domain, counted in the process where it happens (the web layer adds
its own next to these; the gauges of the database's state are read at scrape time:
bot/app/gauges.py)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

FIRE_TOTAL = Counter(
    "gitops_fire_total",
    "Transitions attempted through fire(), by event and outcome "
    "(success, failure, illegal, conflict, stale).",
    ["event", "outcome"],
)
FIRE_SECONDS = Histogram(
    "gitops_fire_seconds",
    "Time spent in fire(), by event.",
    ["event"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
STATE_SECONDS = Histogram(
    "gitops_state_seconds",
    "Time a change spent in a state, observed when a transition leaves it (moves within the "
    "state do not end the stay), by the state left.",
    ["state"],
    buckets=(1, 10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 3 * 86400),
)
VALIDATED_TOTAL = Counter("gitops_validated_total", "Changes confirmed in effect.")
CALLBACKS_TOTAL = Counter(
    "gitops_callbacks_total",
    "Completion callbacks to API submitters, by outcome: sent (the receiver answered 2xx), "
    "failed (backed off, to be tried again), dead (failed for good, on the dashboard).",
    ["outcome"],
)
