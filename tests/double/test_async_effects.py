"""GitLab's asynchronous effects in the double (flow.py), each against GitLab's source: the head
pipeline attach, the mergeability recheck and the approval reset after a push."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import responses

from sim.gitlab import GitLabDouble
from tests.double import START, Clock
from tests.double.flow_support import (
    PROJECT,
    URL,
    call,
    get_json,
    head_pipeline_id,
    hooks,
    listed_mr,
    make_double,
    read_mr,
)


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """Asynchronous effects on for the whole double."""
    d = make_double(clock)
    d.set_async_effects()
    return d


@pytest.fixture(autouse=True)
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    with double.mocked(URL) as mocked:
        yield mocked


def attached_mr(double: GitLabDouble, branch: str = "change-1") -> int:
    """An MR whose first pipeline succeeded and was attached as its head pipeline."""
    iid = double.open_mr(PROJECT, branch, author="bot", files={"b.txt": "b\n"}).iid
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "success")
    double.run_effects()
    double.take_outgoing()
    return iid


def test_head_pipeline_lags_the_push_until_update_head_pipeline_worker_runs(
    double: GitLabDouble,
) -> None:
    """GitLab: app/workers/merge_requests/update_head_pipeline_worker.rb (subscribed to
    Ci::PipelineCreatedEvent, lib/gitlab/event_store/subscriptions/
    merge_requests_subscriptions.rb) and MergeRequest#update_head_pipeline
    (app/models/merge_request.rb): until the worker runs, GET /merge_requests/:iid shows the
    previous head's pipeline with that pipeline's own `sha`; the new pipeline's Pipeline Hook
    (PipelineHooksWorker, app/models/ci/pipeline.rb) may already have gone out."""
    iid = attached_mr(double)
    old = read_mr(iid)
    old_pipeline = old["head_pipeline"]
    assert old_pipeline["sha"] == old["sha"]
    new_sha = double.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
    new_pipeline = head_pipeline_id(double, iid)
    sent = hooks(double, "pipeline")
    assert [(h["object_attributes"]["id"], h["object_attributes"]["sha"]) for h in sent] == [
        (new_pipeline, new_sha)
    ]
    lagging = read_mr(iid)
    assert lagging["sha"] == new_sha
    assert lagging["head_pipeline"]["id"] == old_pipeline["id"]
    assert lagging["head_pipeline"]["sha"] == old["sha"] != new_sha
    assert lagging["head_pipeline"]["status"] == "success"
    assert double.run_effects("attach_head_pipeline") == 1
    attached = read_mr(iid)["head_pipeline"]
    assert (attached["id"], attached["sha"], attached["status"]) == (
        new_pipeline,
        new_sha,
        "running",
    )


def test_head_pipeline_attach_is_clocked_work_due_its_delay_after_the_push(
    double: GitLabDouble, clock: Clock
) -> None:
    """The attach is a Sidekiq job (MergeRequests::UpdateHeadPipelineWorker): with a delay set
    it falls due that long after the pipeline was created and `run_due` does it then."""
    double.set_async_effects(attach_seconds=5, mergeability_seconds=60)
    iid = attached_mr(double)
    old_id = read_mr(iid)["head_pipeline"]["id"]
    double.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
    assert double.next_due() == START + timedelta(seconds=5)
    clock.advance(4)
    assert double.run_due() == 0
    assert read_mr(iid)["head_pipeline"]["id"] == old_id
    clock.advance(1)
    assert double.run_due() == 1
    assert read_mr(iid)["head_pipeline"]["id"] == head_pipeline_id(double, iid) != old_id


def test_gitlab_rebase_head_pipeline_lags_like_any_push(double: GitLabDouble) -> None:
    """GitLab's own rebase (PUT /rebase, then RebaseWorker) pushes the rebased head like any
    push: MergeRequests::RefreshService and a new pipeline, attached by
    MergeRequests::UpdateHeadPipelineWorker later."""
    iid = attached_mr(double)
    before = read_mr(iid)
    double.advance_branch(PROJECT)
    assert call("PUT", f"/merge_requests/{iid}/rebase").status_code == 202
    double.complete_rebase(PROJECT, iid)
    rebased = read_mr(iid)
    assert rebased["sha"] != before["sha"]
    assert rebased["head_pipeline"]["sha"] == before["sha"]
    double.run_effects("attach_head_pipeline")
    assert read_mr(iid)["head_pipeline"]["sha"] == rebased["sha"]


def test_synchronous_by_default_the_head_pipeline_follows_the_push(clock: Clock) -> None:
    """With asynchronous effects off (the default) the double attaches at once."""
    d = make_double(clock)
    with d.mocked(URL):
        iid = d.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
        new_sha = d.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
        mr = read_mr(iid)
        assert mr["head_pipeline"]["sha"] == new_sha == mr["sha"]
        assert d.pending_effects() == []


def test_head_pipeline_object_carries_its_own_sha_like_api_entities_ci_pipeline(
    double: GitLabDouble,
) -> None:
    """GitLab: lib/api/entities/merge_request.rb exposes `head_pipeline` with
    API::Entities::Ci::Pipeline (lib/api/entities/ci/pipeline.rb, PipelineBasic's id,
    project_id, sha, ref, status, source, created_at, updated_at, web_url and more)."""
    iid = attached_mr(double)
    head = read_mr(iid)["head_pipeline"]
    for key in ("id", "iid", "project_id", "sha", "ref", "status", "source", "web_url"):
        assert key in head
    assert (head["ref"], head["source"]) == (
        f"refs/merge-requests/{iid}/head",
        "merge_request_event",
    )


def test_pipelines_must_succeed_judges_only_a_pipeline_for_the_current_head(
    double: GitLabDouble,
) -> None:
    """GitLab's CI merge check uses `diff_head_pipeline` (the head pipeline only when it
    `matches_sha_or_source_sha?` the head; MergeRequests::Mergeability::CheckCiStatusService,
    app/models/merge_request.rb): the old head's green pipeline does not make the new head
    mergeable, and PUT /merge answers 405 (lib/api/merge_requests.rb `not_allowed!`)."""
    iid = attached_mr(double)
    double.approve_as(PROJECT, iid, "alice")
    double.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
    double.run_effects("mergeability_check")
    assert read_mr(iid)["head_pipeline"]["status"] == "success"
    assert read_mr(iid)["detailed_merge_status"] == "ci_must_pass"
    refused = call("PUT", f"/merge_requests/{iid}/merge", "alice-token")
    assert refused.status_code == 405
    double.run_effects("attach_head_pipeline")
    assert read_mr(iid)["detailed_merge_status"] == "ci_still_running"


def test_merge_status_is_unchecked_after_a_push_and_checking_once_read_until_rechecked(
    double: GitLabDouble,
) -> None:
    """GitLab: MergeRequests::RefreshService `mark_as_unchecked`; the MR entity's `merge_status`
    calls `check_mergeability(async: true)` (lib/api/entities/merge_request_basic.rb), which
    marks it `checking` and queues MergeRequestMergeabilityCheckWorker
    (app/services/merge_requests/mergeability_check_service.rb); DetailedMergeStatusService
    answers `unchecked`/`checking` before any check. Lists do not ask for a recheck."""
    iid = attached_mr(double)
    double.run_effects()
    assert read_mr(iid)["detailed_merge_status"] == "mergeable"
    double.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
    update = hooks(double, "merge_request")[0]["object_attributes"]
    assert (update["action"], update["detailed_merge_status"]) == ("update", "unchecked")
    listed = listed_mr(iid)
    assert (listed["merge_status"], listed["detailed_merge_status"]) == ("unchecked", "unchecked")
    read = read_mr(iid)
    assert (read["merge_status"], read["detailed_merge_status"]) == ("checking", "checking")
    assert double.run_effects("mergeability_check") == 1
    assert read_mr(iid)["merge_status"] == "can_be_merged"


def test_a_push_to_the_target_branch_marks_its_merge_requests_unchecked(
    double: GitLabDouble,
) -> None:
    """GitLab: MergeRequests::RefreshService#reload_merge_requests marks every open MR whose
    source or target branch was pushed `unchecked`."""
    iid = attached_mr(double)
    double.run_effects()
    double.advance_branch(PROJECT)
    assert listed_mr(iid)["detailed_merge_status"] == "unchecked"
    double.run_effects()
    assert listed_mr(iid)["detailed_merge_status"] != "unchecked"


def test_merge_of_an_unchecked_merge_request_checks_mergeability_synchronously(
    double: GitLabDouble,
) -> None:
    """GitLab: MergeRequest#mergeable? runs `check_mergeability` before the git checks
    (app/models/merge_request.rb), so PUT /merge does not wait for the worker."""
    iid = attached_mr(double)
    double.advance_branch(PROJECT)
    assert listed_mr(iid)["detailed_merge_status"] == "unchecked"
    merged = call("PUT", f"/merge_requests/{iid}/merge", "alice-token")
    assert merged.status_code == 200, merged.text
    assert merged.json()["state"] == "merged"


def test_reset_approvals_on_push_is_asynchronous_approvals_still_listed_until_the_worker(
    clock: Clock,
) -> None:
    """GitLab: ee/app/services/ee/merge_requests/refresh_service.rb temporarily unapproves the
    MR and queues MergeRequestResetApprovalsWorker 10 seconds later; until it ran
    DetailedMergeStatusService answers `approvals_syncing` and GET .../approvals still lists
    the approvals (ee/app/services/merge_requests/reset_approvals_service.rb deletes them)."""
    d = make_double(clock, required_approvals=1, reset_approvals_on_push=True)
    d.set_async_effects()
    with d.mocked(URL):
        iid = attached_mr(d)
        d.approve_as(PROJECT, iid, "alice")
        d.run_effects()
        d.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
        d.run_effects("mergeability_check")
        d.run_effects("attach_head_pipeline")
        approvals = get_json(f"/merge_requests/{iid}/approvals")
        assert [a["user"]["username"] for a in approvals["approved_by"]] == ["alice"]
        assert read_mr(iid)["detailed_merge_status"] == "approvals_syncing"
        assert d.next_due() == START + timedelta(seconds=10)
        clock.advance(10)
        d.run_due()
        assert get_json(f"/merge_requests/{iid}/approvals")["approved_by"] == []
        assert read_mr(iid)["detailed_merge_status"] == "not_approved"


def test_reset_approvals_on_push_is_immediate_without_asynchronous_effects(clock: Clock) -> None:
    """The double's default: the approvals are gone as soon as the push is."""
    d = make_double(clock, required_approvals=1, reset_approvals_on_push=True)
    with d.mocked(URL):
        iid = d.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
        d.approve_as(PROJECT, iid, "alice")
        d.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
        assert get_json(f"/merge_requests/{iid}/approvals")["approved_by"] == []


@pytest.mark.parametrize("async_effects", [False, True])
def test_gitlab_rebase_keeps_approvals_with_reset_approvals_on_push(
    clock: Clock, async_effects: bool
) -> None:
    """GitLab does not reset approvals for the head its own rebase produced
    (`merge_request.rebase_commit_sha != newrev` in ResetApprovalsService#reset_approvals?,
    ee/app/services/merge_requests/reset_approvals_service.rb; gitlab-org/gitlab#942)."""
    d = make_double(clock, required_approvals=1, reset_approvals_on_push=True)
    d.set_async_effects(async_effects)
    with d.mocked(URL):
        iid = d.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
        d.approve_as(PROJECT, iid, "alice")
        d.advance_branch(PROJECT)
        assert call("PUT", f"/merge_requests/{iid}/rebase").status_code == 202
        d.complete_rebase(PROJECT, iid)
        d.run_effects()
        approvals = get_json(f"/merge_requests/{iid}/approvals")
        assert [a["user"]["username"] for a in approvals["approved_by"]] == ["alice"]
        assert read_mr(iid)["detailed_merge_status"] != "approvals_syncing"
