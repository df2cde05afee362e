"""Timed GitLab work: pipelines and rebases that finish by themselves on the double's clock."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import requests

from sim.gitlab import Access, GitLabDouble
from tests.double import START, Clock

PROJECT = "platform/config"


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """A fast-forward project, a hook for pipeline and MR events, pipelines of 300 s."""
    d = GitLabDouble(clock=clock)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, protect_default=False)
    d.add_user("bot", token="t", access={PROJECT: Access.DEVELOPER})
    d.project(PROJECT).merge_method = "ff"
    d.add_hook(PROJECT, "http://bot.test/hook", events=["pipeline_events", "merge_requests_events"])
    d.pipeline_seconds = 300
    d.rebase_seconds = 5
    return d


def pipeline_hooks(double: GitLabDouble) -> list[tuple[int, str]]:
    """(pipeline id, status) of each Pipeline Hook sent since the last call."""
    return [
        (d.payload["object_attributes"]["id"], d.payload["object_attributes"]["status"])
        for d in double.take_outgoing()
        if d.kind == "pipeline"
    ]


def test_a_pipeline_finishes_its_duration_after_it_started_with_its_hook(
    double: GitLabDouble, clock: Clock
) -> None:
    """Nothing is due before 300 s; at 300 s the pipeline succeeds and its hook goes out."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    assert pipeline_hooks(double) == [(pipeline.id, "running")]
    assert double.next_due() == START + timedelta(seconds=300)
    clock.advance(299)
    assert double.run_due() == 0
    assert pipeline.status == "running"
    clock.advance(1)
    assert double.run_due() == 1
    assert pipeline.status == "success"
    assert pipeline.finished_at == START + timedelta(seconds=300)
    assert pipeline_hooks(double) == [(pipeline.id, "success")]
    assert double.next_due() is None
    assert double.detailed_merge_status(PROJECT, iid) == "mergeable"


def test_a_rebase_completes_its_duration_after_it_was_queued_and_starts_a_pipeline(
    double: GitLabDouble, clock: Clock
) -> None:
    """A queued rebase completes 5 s later: new head on the target, a new 300 s pipeline."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    clock.advance(300)
    double.run_due()
    double.advance_branch(PROJECT, "main")
    assert double.detailed_merge_status(PROJECT, iid) == "need_rebase"
    with double.mocked():
        answer = requests.put(
            f"https://gitlab.example.com/api/v4/projects/{double.project(PROJECT).id}"
            f"/merge_requests/{iid}/rebase",
            headers={"PRIVATE-TOKEN": "t"},
            timeout=5,
        )
    assert answer.status_code == 202
    assert double.next_due() == clock.now + timedelta(seconds=5)
    clock.advance(5)
    double.take_outgoing()
    assert double.run_due() == 1
    mr = double.mr(PROJECT, iid)
    assert not mr.rebase_in_progress
    assert double.is_ancestor(str(double.branch_head(PROJECT, "main")), mr.sha)
    assert double.detailed_merge_status(PROJECT, iid) == "ci_still_running"
    kinds = [json.loads(d.body)["object_kind"] for d in double.take_outgoing()]
    assert kinds == ["merge_request", "pipeline"]
    assert double.next_due() == clock.now + timedelta(seconds=300)


def test_work_due_together_runs_in_time_order_and_failures_can_be_chosen(
    double: GitLabDouble, clock: Clock
) -> None:
    """Two pipelines due by now finish oldest first, in the chosen result."""
    double.pipeline_result = "failed"
    first = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    clock.advance(10)
    second = double.open_mr(PROJECT, "change-2", author="bot", files={"c.txt": "c\n"}).iid
    ids = [double.latest_pipeline(PROJECT, iid).id for iid in (first, second)]  # type: ignore[union-attr]
    double.take_outgoing()
    clock.advance(1000)
    assert double.run_due() == 2
    assert pipeline_hooks(double) == [(ids[0], "failed"), (ids[1], "failed")]
    with pytest.raises(ValueError, match="cannot finish"):
        double.pipeline_result = "running"


def test_untimed_by_default(clock: Clock) -> None:
    """Without durations nothing finishes by itself (tests steer pipelines and rebases)."""
    d = GitLabDouble(clock=clock)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, protect_default=False)
    d.add_user("bot", token="t", access={PROJECT: Access.DEVELOPER})
    d.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"})
    clock.advance(10_000)
    assert (d.next_due(), d.run_due()) == (None, 0)
