"""What a worker process counts is scraped from the worker (GITOPS_WORKER_METRICS_PORT): the
steps' transitions, the approval call and the delivery-to-transition latency happen there, not
in the web processes that answer the deliveries."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.world import World

pytestmark = pytest.mark.e2e


#: (metric name, its labels) -> value
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample of one /metrics answer: (name, labels) -> value."""
    answer = requests.get(url, timeout=10)
    assert answer.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def total(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, got), v in samples.items() if n == name and want <= got)


def test_a_workers_counters_are_scraped_from_the_worker(make_world: Callable[..., World]) -> None:
    """One worker with its metrics port: after a change reaches VALIDATED, that worker's
    /metrics shows the transitions it fired, the approval request it sent and how long
    deliveries took to move the change; the web's /metrics does not carry the approval call."""
    world = make_world(workers=1, worker_metrics=True)
    op_id = world.submit(Flow.APPROVE_FIRST, subject="svc-metrics")
    world.wait_state(op_id, S.VALIDATED)

    worker = scrape(world.worker_metrics["worker-1"])
    assert total(worker, "gitops_fire_total", outcome="success") >= 5
    assert total(worker, "gitops_approval_calls_total", call="submit", outcome="ok") == 1
    assert total(worker, "gitops_webhook_to_transition_seconds_count") >= 1
    assert total(worker, "gitops_validated_total") == 1

    web = scrape(f"{world.web[0]}/metrics")
    assert total(web, "gitops_approval_calls_total", call="submit") == 0
