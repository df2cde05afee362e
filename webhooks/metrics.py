"""Prometheus metrics of the ingress: deliveries by source and outcome, ack latency (the inbox's
backlog is read at scrape time: bot/app/gauges.py)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

DELIVERIES = Counter(
    "gitops_webhook_deliveries_total",
    "Webhook and callback deliveries by source and outcome (accepted, duplicate, quarantined, "
    "ignored, unauthorized, too_large, fallback, unavailable).",
    ["source", "outcome"],
)
ACK_SECONDS = Histogram(
    "gitops_webhook_ack_seconds",
    "Time from receiving a delivery to answering it, by source.",
    ["source"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
