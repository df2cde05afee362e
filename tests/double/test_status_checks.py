"""Merge checks that mean "wait" in the double, against GitLab's
MergeRequests::Mergeability checks: external status checks, `merge_after`, "Pipelines must
succeed" and the pipeline statuses `waiting_for_callback` and `canceling`."""

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
    head_pipeline_id,
    hooks,
    make_double,
    read_mr,
)


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """The double's defaults: "Pipelines must succeed" on, no approvals required."""
    return make_double(clock)


@pytest.fixture(autouse=True)
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    with double.mocked(URL) as mocked:
        yield mocked


def green_mr(double: GitLabDouble) -> int:
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "success")
    return iid


def test_status_checks_must_pass_while_an_external_check_is_pending_or_failed(
    double: GitLabDouble,
) -> None:
    """ee/app/services/merge_requests/mergeability/check_external_status_checks_passed_service.rb
    (`status_checks_must_pass`) fails while `any_external_status_checks_not_passed?`
    (ee/app/models/ee/project.rb: each check's status for `diff_head_sha` is not `passed`),
    with `only_allow_merge_if_all_status_checks_passed` on (Ultimate). A new head is pending
    again; PUT /merge answers 405 meanwhile."""
    double.add_status_check(PROJECT, "security")
    iid = green_mr(double)
    assert read_mr(iid)["detailed_merge_status"] == "mergeable"
    double.set_status_checks_must_pass(PROJECT)
    assert read_mr(iid)["detailed_merge_status"] == "status_checks_must_pass"
    assert call("PUT", f"/merge_requests/{iid}/merge", "alice-token").status_code == 405
    double.respond_status_check(PROJECT, iid, "security", "failed")
    assert read_mr(iid)["detailed_merge_status"] == "status_checks_must_pass"
    double.respond_status_check(PROJECT, iid, "security", "passed")
    assert read_mr(iid)["detailed_merge_status"] == "mergeable"
    double.push(PROJECT, "change-1", {"b.txt": "b2\n"}, author="bot")
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "success")
    assert double.status_checks(PROJECT, iid) == {"security": "pending"}
    assert read_mr(iid)["detailed_merge_status"] == "status_checks_must_pass"


def test_merge_after_makes_detailed_status_merge_time_until_it_passes(
    double: GitLabDouble, clock: Clock
) -> None:
    """app/services/merge_requests/mergeability/check_merge_time_service.rb (`merge_time`)
    fails while `merge_schedule.merge_after` is in the future; the API exposes `merge_after`
    (lib/api/entities/merge_request_basic.rb; introduced in GitLab 17.5, doc/api/
    merge_requests.md, gitlab-org/gitlab!165092)."""
    iid = green_mr(double)
    when = START + timedelta(hours=2)
    double.set_merge_after(PROJECT, iid, when)
    mr = read_mr(iid)
    assert (mr["detailed_merge_status"], mr["merge_after"]) == (
        "merge_time",
        "2030-01-01T02:00:00.000Z",
    )
    assert call("PUT", f"/merge_requests/{iid}/merge", "alice-token").status_code == 405
    clock.advance(2 * 3600)
    assert read_mr(iid)["detailed_merge_status"] == "mergeable"


@pytest.mark.parametrize(
    ("status", "detailed"),
    [
        ("failed", "ci_must_pass"),
        ("canceled", "ci_must_pass"),
        ("skipped", "ci_must_pass"),
        ("running", "ci_still_running"),
        ("manual", "ci_still_running"),
        ("waiting_for_callback", "ci_still_running"),
        ("canceling", "ci_still_running"),
    ],
)
def test_pipelines_must_succeed_refuses_the_merge_unless_the_head_pipeline_succeeded(
    double: GitLabDouble, status: str, detailed: str
) -> None:
    """CheckCiStatusService (`ci_must_pass`) passes only a head pipeline that succeeded;
    DetailedMergeStatusService#ci_status says `ci_still_running` while the pipeline is not
    complete (`diff_head_pipeline_considered_in_progress?`: with "Pipelines must succeed",
    `!pipeline.complete?`; Ci::HasStatus COMPLETED_STATUSES are success, failed, canceled,
    skipped). PUT /merge is `not_allowed!` (405, lib/api/merge_requests.rb:
    `mergeable_state?` fails)."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), status)
    assert read_mr(iid)["detailed_merge_status"] == detailed
    refused = call("PUT", f"/merge_requests/{iid}/merge", "alice-token")
    assert (refused.status_code, refused.json()["message"]) == (405, "405 Method Not Allowed")


def test_without_pipelines_must_succeed_a_failed_pipeline_does_not_stop_the_merge(
    double: GitLabDouble,
) -> None:
    """GitLab's default (`only_allow_merge_if_pipeline_succeeds` false): CheckCiStatusService
    is inactive, so a failed head pipeline does not block the merge."""
    double.set_pipelines_must_succeed(PROJECT, False)
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "failed")
    assert read_mr(iid)["detailed_merge_status"] == "mergeable"
    assert call("PUT", f"/merge_requests/{iid}/merge", "alice-token").status_code == 200


@pytest.mark.parametrize("status", ["waiting_for_callback", "canceling"])
def test_set_pipeline_accepts_waiting_for_callback_and_canceling_with_their_hooks(
    double: GitLabDouble, status: str
) -> None:
    """app/models/concerns/ci/has_status.rb AVAILABLE_STATUSES include `waiting_for_callback`
    (GitLab 16.6, gitlab-org/gitlab!134605) and `canceling` (default on from GitLab 17.0,
    gitlab-org/gitlab!152387); Ci::Pipeline#set_status maps both, and each transition sends
    a Pipeline Hook (app/models/ci/pipeline.rb)."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    double.take_outgoing()
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), status)
    sent = hooks(double, "pipeline")
    assert [h["object_attributes"]["status"] for h in sent] == [status]
    assert sent[0]["object_attributes"]["finished_at"] is None
    assert read_mr(iid)["head_pipeline"]["status"] == status


def test_a_timed_canceling_pipeline_ends_canceled(double: GitLabDouble, clock: Clock) -> None:
    """`canceling` runs the jobs' `after_script`s, then the pipeline is `canceled` (Ci::Build
    `drop`/`success` from canceling go to canceled, app/models/ci/build.rb)."""
    double.pipeline_seconds = 30
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "canceling")
    clock.advance(30)
    double.run_due()
    assert read_mr(iid)["head_pipeline"]["status"] == "canceled"
