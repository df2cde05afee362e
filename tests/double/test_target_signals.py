"""What tells a client a merged head reached its target in the double: the Deployment Hook and
branch pipelines on the target branch, against GitLab's DataBuilder::Deployment and
DataBuilder::Pipeline; and the project's `ci_config_path` in the API and hooks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from sim.gitlab import GitLabDouble
from tests.double import Clock
from tests.double.flow_support import (
    PROJECT,
    URL,
    call,
    get_json,
    head_pipeline_id,
    hooks,
    make_double,
)


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """A project whose `main` runs a branch pipeline on every push (merges included)."""
    return make_double(clock, branch_pipelines=["main"])


@pytest.fixture(autouse=True)
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    with double.mocked(URL) as mocked:
        yield mocked


def merged(double: GitLabDouble) -> str:
    """Merges an MR whose pipeline passed; the target's new head."""
    iid = double.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"}).iid
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "success")
    double.take_outgoing()
    reply = call("PUT", f"/merge_requests/{iid}/merge", "alice-token")
    assert reply.status_code == 200, reply.text
    head = double.branch_head(PROJECT, "main")
    assert head is not None
    return head


def test_target_branch_pipeline_after_a_merge_carries_the_branch_ref_and_no_merge_request(
    double: GitLabDouble,
) -> None:
    """A push to the target (the merge) runs a branch pipeline: lib/gitlab/data_builder/
    pipeline.rb sends `ref` = Ci::Pipeline#source_ref (the branch name for a branch pipeline),
    `sha` the merged head, `source` push and `merge_request` null (`pipeline.merge_request`
    is nil); the pipelines API shows the same ref."""
    head = merged(double)
    sent = hooks(double, "pipeline")
    assert len(sent) == 1
    attrs = sent[0]["object_attributes"]
    assert (attrs["ref"], attrs["sha"], attrs["source"]) == ("main", head, "push")
    assert sent[0]["merge_request"] is None
    listed = get_json(f"/pipelines?ref=main&sha={head}")
    assert [(p["id"], p["ref"]) for p in listed] == [(attrs["id"], "main")]


def test_branch_pipelines_are_off_unless_asked(clock: Clock) -> None:
    """The double's default: a merge runs no branch pipeline (a test asks for one)."""
    d = make_double(clock)
    with d.mocked(URL):
        merged(d)
        assert hooks(d, "pipeline") == []
        pipeline = d.run_branch_pipeline(PROJECT)
        assert pipeline is not None
        assert (pipeline.ref, pipeline.source, pipeline.mr_iid) == ("main", "push", None)


def test_deployment_hook_carries_environment_ref_and_short_sha_not_the_full_sha(
    double: GitLabDouble,
) -> None:
    """lib/gitlab/data_builder/deployment.rb: `environment` (its name), `environment_tier`,
    `environment_slug`, `short_sha`, `commit_url` (the only place with the full sha) and
    `ref` (the deployment's ref: a branch or tag name), beside `status` and `deployment_id`;
    no `sha` key (doc/user/project/integrations/webhook_events.md "Deployment events")."""
    head = merged(double)
    double.deploy(PROJECT, environment="staging")
    double.deploy(PROJECT, environment="production", ref="main")
    sent = hooks(double, "deployment")
    assert [(h["environment"], h["environment_tier"], h["ref"]) for h in sent] == [
        ("staging", "staging", "main"),
        ("production", "production", "main"),
    ]
    for payload in sent:
        assert payload["short_sha"] == head[:8]
        assert payload["commit_url"].endswith(f"/-/commit/{head}")
        assert "sha" not in payload


def test_deployment_of_a_tag_sends_the_tag_as_ref(double: GitLabDouble) -> None:
    """A deployment's `ref` is what its job ran for: a tag deploys with the tag's name."""
    sha = double.branch_head(PROJECT, "main")
    assert sha is not None
    double.add_tag(PROJECT, "v1.0", sha)
    double.deploy(PROJECT, environment="production", ref="v1.0")
    payload = hooks(double, "deployment")[0]
    assert (payload["ref"], payload["short_sha"]) == ("v1.0", sha[:8])


def test_ci_config_path_is_shown_by_the_project_api_and_in_hook_project_attributes(
    clock: Clock,
) -> None:
    """lib/api/entities/project.rb exposes `ci_config_path` (null when unset);
    Project#hook_attrs (app/models/project.rb) sends it in every hook's `project`."""
    d = make_double(clock, ci_config_path="ci/pipeline.yml")
    with d.mocked(URL):
        assert get_json("")["ci_config_path"] == "ci/pipeline.yml"
        d.open_mr(PROJECT, "change-1", author="bot", files={"b.txt": "b\n"})
        payload = hooks(d, "merge_request")[0]
        assert payload["project"]["ci_config_path"] == "ci/pipeline.yml"
