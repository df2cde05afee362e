"""Delayed jobs on RQ never run early (RQ keeps their time in whole seconds)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import fakeredis
from rq.registry import ScheduledJobRegistry

from jobs.queue import RQWorkQueue, not_before


def test_not_before_rounds_up_to_a_whole_second() -> None:
    """12.4 s becomes 13 s; a whole second stays as it is."""
    assert not_before(datetime(2030, 1, 1, 0, 0, 12, 400_000, tzinfo=UTC)) == datetime(
        2030, 1, 1, 0, 0, 13, tzinfo=UTC
    )
    whole = datetime(2030, 1, 1, 0, 0, 12, tzinfo=UTC)
    assert not_before(whole) == whole


def test_a_delayed_job_is_scheduled_no_sooner_than_asked() -> None:
    """The scheduled score of a job delayed 2.5 s is at or after now + 2.5 s."""
    redis = fakeredis.FakeRedis()
    queue = RQWorkQueue(redis)
    asked = time.time() + 2.5
    queue.enqueue_in(2.5, "jobs.drive.drive", "op-1", job_id="later:op-1")
    registry = ScheduledJobRegistry(queue=queue.queue)  # type: ignore[no-untyped-call]
    score = redis.zscore(registry.key, "later-op-1")  # the id as RQ allows it
    assert score is not None
    assert float(score) >= asked
