"""The reads against a mocked GitLab: MR view, pipelines, approvals, membership."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses
from responses import matchers

from bot.gitlab import GitLabUnavailable, approved_by, member_access_level, mr_pipelines, read_mr
from tests.adapters.test_gitlab_harness import SHA, P, account, mock_gitlab, mr_json

MR = f"{P}/merge_requests/7"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


def test_read_mr_parses_what_the_bot_uses(rsps: responses.RequestsMock) -> None:
    """read_mr asks for rebase_in_progress and parses state, statuses, head, labels and pipeline."""
    rsps.add(
        responses.GET,
        MR,
        json=mr_json(rebase_in_progress=True, merge_error="Rebase failed"),
        match=[matchers.query_param_matcher({"include_rebase_in_progress": "true"})],
    )

    mr = read_mr(account().project(42), 7)

    assert (mr.state, mr.detailed_merge_status, mr.sha) == ("opened", "mergeable", SHA)
    assert (mr.rebase_in_progress, mr.merge_error) == (True, "Rebase failed")
    assert (mr.author, mr.labels) == ("alice", ("gitops::merging",))
    assert (mr.source_project_id, mr.target_project_id) == (42, 42)
    assert (mr.head_pipeline_id, mr.head_pipeline_status) == (900, "success")
    assert mr.web_url.endswith("/merge_requests/7")
    assert len(rsps.calls) == 1


def test_project_path_is_encoded(rsps: responses.RequestsMock) -> None:
    """A project named by path is URL-encoded in the call."""
    rsps.add(
        responses.GET, f"{P.rsplit('/', 1)[0]}/platform%2Fconfig/merge_requests/7", json=mr_json()
    )

    assert read_mr(account().project("platform/config"), 7).iid == 7


def test_mr_pipelines(rsps: responses.RequestsMock) -> None:
    """The MR's pipelines come back newest first, with id, sha and status."""
    rsps.add(
        responses.GET,
        f"{MR}/pipelines",
        json=[
            {"id": 11, "sha": SHA, "ref": "refs/merge-requests/7/head", "status": "running"},
            {"id": 10, "sha": "c" * 40, "ref": "gitops/op-1", "status": "failed"},
        ],
    )

    pipelines = mr_pipelines(account().project(42), 7)

    assert [(p.id, p.status) for p in pipelines] == [(11, "running"), (10, "failed")]
    assert len(rsps.calls) == 1


def test_approved_by_usernames(rsps: responses.RequestsMock) -> None:
    """approved_by gives the usernames in the approvals' approved_by list."""
    rsps.add(
        responses.GET,
        f"{MR}/approvals",
        json={"approved_by": [{"user": {"username": "a"}}, {"user": {"username": "b"}}]},
    )

    assert approved_by(account().project(42), 7) == {"a", "b"}
    assert len(rsps.calls) == 1


def test_member_access_level(rsps: responses.RequestsMock) -> None:
    """Membership reads the effective (inherited) level; 404 means not a member."""
    rsps.add(responses.GET, f"{P}/members/all/5", json={"id": 5, "access_level": 40})
    rsps.add(responses.GET, f"{P}/members/all/6", status=404, json={"message": "404 Not found"})
    project = account().project(42)

    assert member_access_level(project, 5) == 40
    assert member_access_level(project, 6) is None
    assert len(rsps.calls) == 2  # one each


def test_member_lookup_failure_raises(rsps: responses.RequestsMock) -> None:
    """A failed membership lookup raises (callers deny), it is never read as "not a member"."""
    rsps.add(responses.GET, f"{P}/members/all/5", status=503)

    with pytest.raises(GitLabUnavailable):
        member_access_level(account().project(42), 5)
