"""How the double moves an open MR when people change it: a push or a force push onto its source
branch, and a retarget, each with the pipeline and the MR Hook GitLab would send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gitlab
import pytest

from sim.gitlab import Access, ApiError, GitLabDouble

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
FILES = {"config/prod.yaml": "replicas: 2\n", "README.md": "config\n"}


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project with a `release` branch, a hook to the bot, and an open MR !1 from `change`."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files=FILES, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("mallory", token="m-token", access={PROJECT: Access.DEVELOPER})
    d.push(PROJECT, "release", {"RELEASE": "1\n"}, start_branch="main")
    d.open_mr(PROJECT, "change", author="bot", files={"config/prod.yaml": "replicas: 3\n"})
    d.add_hook(PROJECT, "https://bot.example.com/webhooks/gitlab", token="s3cret")
    with d.mocked(URL):
        yield d


def mr_hooks(double: GitLabDouble) -> list[dict[str, Any]]:
    """The object_attributes of the queued MR Hooks."""
    return [d.payload["object_attributes"] for d in double.outgoing if d.kind == "merge_request"]


def test_push_moves_the_mr_head_with_a_pipeline_and_an_update_hook(double: GitLabDouble) -> None:
    """A push onto the MR's source branch: new head, a pipeline for it, MR Hook update + oldrev."""
    before = double.mr(PROJECT, 1).sha

    after = double.push(PROJECT, "change", {".gitlab-ci.yml": "evil: true\n"}, author="mallory")

    assert double.mr(PROJECT, 1).sha == after
    pipeline = double.latest_pipeline(PROJECT, 1)
    assert pipeline is not None
    assert (pipeline.sha, pipeline.before_sha) == (after, before)
    assert [d.kind for d in double.outgoing] == ["merge_request", "pipeline"]
    (hook,) = mr_hooks(double)
    assert (hook["action"], hook["oldrev"]) == ("update", before)
    assert hook["last_commit"]["id"] == after


def test_force_push_rewrites_history_and_the_mr_follows(double: GitLabDouble) -> None:
    """A force push replaces the branch with one commit on the target; the MR follows it."""
    before = double.mr(PROJECT, 1).sha
    main = double.advance_branch(PROJECT)

    after = double.force_push(PROJECT, "change", {"CODEOWNERS": "* @mallory\n"}, author="mallory")

    assert double.branch_head(PROJECT, "change") == after
    assert double.project(PROJECT).branches["change"] == after
    assert double.is_ancestor(main, after)
    assert not double.is_ancestor(before, after)
    assert double.file(PROJECT, "config/prod.yaml", "change") == "replicas: 2\n"
    assert double.file(PROJECT, "CODEOWNERS", "change") == "* @mallory\n"
    assert double.mr(PROJECT, 1).sha == after
    pipeline = double.latest_pipeline(PROJECT, 1)
    assert pipeline is not None
    assert pipeline.sha == after
    (hook,) = mr_hooks(double)
    assert (hook["action"], hook["oldrev"]) == ("update", before)
    diffs = gitlab.Gitlab(URL, private_token="bot-token").http_get(
        "/projects/platform%2Fconfig/merge_requests/1/diffs"
    )
    assert [d["new_path"] for d in diffs] == ["CODEOWNERS"]


def test_force_push_onto_a_given_base_or_without_an_mr(double: GitLabDouble) -> None:
    """`base` picks the commit to build on; a branch without an MR builds on the default branch."""
    release = double.branch_head(PROJECT, "release")
    on_release = double.force_push(PROJECT, "change", {"x": "1\n"}, base="release")
    assert double.project(PROJECT).branches["change"] == on_release
    assert double.file(PROJECT, "RELEASE", "change") == "1\n"
    assert release is not None
    assert double.is_ancestor(release, on_release)

    fresh = double.force_push(PROJECT, "elsewhere", {"y": "2\n"})
    assert double.file(PROJECT, "RELEASE", "elsewhere") is None
    assert double.file(PROJECT, "y", "elsewhere") == "2\n"
    assert double.branch_head(PROJECT, "elsewhere") == fresh


def test_retarget_changes_the_target_and_sends_the_update_hook(double: GitLabDouble) -> None:
    """Retargeting the MR: its target and diff base change, MR Hook update names the change."""
    pipelines = len(double.project(PROJECT).pipelines)

    double.retarget(PROJECT, 1, "release", by="mallory")

    assert double.mr(PROJECT, 1).target_branch == "release"
    (hook,) = mr_hooks(double)
    assert hook["action"] == "update"
    assert hook["target_branch"] == "release"
    changes = double.outgoing[0].payload["changes"]
    assert changes["target_branch"] == {"previous": "main", "current": "release"}
    assert double.outgoing[0].payload["user"]["username"] == "mallory"
    assert len(double.project(PROJECT).pipelines) == pipelines
    mr = gitlab.Gitlab(URL, private_token="bot-token").projects.get(PROJECT).mergerequests.get(1)
    assert mr.target_branch == "release"


def test_retarget_through_the_api_is_the_same(double: GitLabDouble) -> None:
    """PUT target_branch through the API does what the control does."""
    project = gitlab.Gitlab(URL, private_token="m-token").projects.get(PROJECT, lazy=True)
    project.mergerequests.update(1, {"target_branch": "release"})
    assert double.mr(PROJECT, 1).target_branch == "release"
    assert double.outgoing[0].payload["changes"]["target_branch"]["current"] == "release"


def test_retarget_to_a_missing_branch_is_refused(double: GitLabDouble) -> None:
    """A target branch that does not exist is GitLab's 422; nothing changes, nothing is sent."""
    with pytest.raises(ApiError) as error:
        double.retarget(PROJECT, 1, "nope")
    assert error.value.status == 422
    assert double.mr(PROJECT, 1).target_branch == "main"
    assert double.outgoing == []
