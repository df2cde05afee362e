"""Prometheus metrics of the domain (the web layer adds its own next to these)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
OUTBOX_PENDING = Gauge("gitops_outbox_pending", "Outbox rows not yet sent.")
VALIDATED_TOTAL = Counter("gitops_validated_total", "Changes confirmed in effect.")
