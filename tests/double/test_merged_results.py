"""Merged results pipelines in the double: MR pipelines on the merge ref, against GitLab's
EE::MergeRequests::CreatePipelineService, Ci::Pipeline and DataBuilder::Pipeline."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from sim.gitlab import GitLabDouble
from tests.double import Clock
from tests.double.flow_support import (
    PROJECT,
    URL,
    get_json,
    head_pipeline_id,
    hooks,
    make_double,
    read_mr,
)


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """A Premium project with "Merged results pipelines" on and the target ahead of the MR."""
    return make_double(clock, merge_pipelines=True)


@pytest.fixture(autouse=True)
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    with double.mocked(URL) as mocked:
        yield mocked


def test_merged_results_pipeline_runs_on_the_merge_ref_commit_of_target_and_head(
    double: GitLabDouble,
) -> None:
    """ee/app/services/ee/merge_requests/create_pipeline_service.rb creates the pipeline with
    `ref: merge_request.merge_ref_path` (refs/merge-requests/:iid/merge), `checkout_sha` the
    merge-ref commit, `target_sha`/`source_sha` its parents
    (app/services/merge_requests/mergeability_check_service.rb: parent_ids == [target_sha,
    source_sha]). The pipelines API shows that ref and sha; GET /repository/commits/:sha shows
    the merge-ref commit's parents, so a client can tell it was built from the head."""
    double.advance_branch(PROJECT)
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    head, target = read_mr(iid)["sha"], double.branch_head(PROJECT, "main")
    pipeline = get_json(f"/pipelines/{head_pipeline_id(double, iid)}")
    assert pipeline["ref"] == f"refs/merge-requests/{iid}/merge"
    assert pipeline["sha"] != head
    commit = get_json(f"/repository/commits/{pipeline['sha']}")
    assert commit["parent_ids"] == [target, head]
    listed = get_json(f"/merge_requests/{iid}/pipelines")
    assert [p["sha"] for p in listed] == [pipeline["sha"]]


def test_merged_results_pipeline_hook_sends_source_branch_ref_and_merge_ref_sha(
    double: GitLabDouble,
) -> None:
    """lib/gitlab/data_builder/pipeline.rb: object_attributes `ref` is Ci::Pipeline#source_ref
    (the MR's source branch for any MR pipeline, app/models/ci/pipeline.rb), `sha` the
    merge-ref commit, `source` merge_request_event; the `merge_request` section names the MR;
    `commit` is the merge-ref commit."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    head = read_mr(iid)["sha"]
    payload = hooks(double, "pipeline")[0]
    attrs = payload["object_attributes"]
    assert (attrs["ref"], attrs["source"]) == ("change-1", "merge_request_event")
    assert attrs["sha"] != head
    assert payload["commit"]["id"] == attrs["sha"]
    assert payload["merge_request"]["iid"] == iid
    assert get_json(f"/repository/commits/{attrs['sha']}")["parent_ids"][1] == head


def test_merge_request_api_head_pipeline_is_the_merged_results_pipeline_and_passes_ci(
    double: GitLabDouble,
) -> None:
    """MergeRequest#find_diff_head_pipeline takes `for_sha_or_source_sha(diff_head_sha)`: the
    merged results pipeline (sha the merge-ref commit, source_sha the head) is the MR's
    `head_pipeline`, and its success passes "Pipelines must succeed"
    (`matches_sha_or_source_sha?`)."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    mr = read_mr(iid)
    assert mr["head_pipeline"]["ref"] == f"refs/merge-requests/{iid}/merge"
    assert mr["head_pipeline"]["sha"] != mr["sha"]
    assert mr["detailed_merge_status"] == "ci_still_running"
    double.set_pipeline(PROJECT, mr["head_pipeline"]["id"], "success")
    assert read_mr(iid)["detailed_merge_status"] == "mergeable"


def test_a_conflicting_merge_request_gets_a_detached_pipeline_on_its_head(
    double: GitLabDouble,
) -> None:
    """No merge ref can be written for a conflicting MR, so
    EE::MergeRequests::CreatePipelineService falls back to `super`: a detached pipeline on
    refs/merge-requests/:iid/head whose `sha` is the head."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"a.txt": "mine\n"}).iid
    double.push(PROJECT, "main", {"a.txt": "theirs\n"})
    double.push(PROJECT, "change-1", {"a.txt": "mine again\n"}, author="bot")
    pipeline = get_json(f"/pipelines/{head_pipeline_id(double, iid)}")
    assert pipeline["ref"] == f"refs/merge-requests/{iid}/head"
    assert pipeline["sha"] == read_mr(iid)["sha"]


def test_without_merged_results_the_pipeline_is_detached_on_the_head(clock: Clock) -> None:
    """The double's default (and GitLab's): MR pipelines on refs/merge-requests/:iid/head, and
    their hook's `ref` is the source branch all the same."""
    d = make_double(clock)
    with d.mocked(URL):
        iid = d.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
        attrs = hooks(d, "pipeline")[0]["object_attributes"]
        assert (attrs["ref"], attrs["sha"]) == ("change-1", read_mr(iid)["sha"])
        assert read_mr(iid)["head_pipeline"]["ref"] == f"refs/merge-requests/{iid}/head"
