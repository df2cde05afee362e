"""What a merge makes in the double for each merge method and with squashing, against GitLab's
MergeRequests::MergeStrategies::FromSourceBranch (app/services/merge_requests/merge_strategies/
from_source_branch.rb), the MR API entity and the MR Hook (HookData::MergeRequestBuilder)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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
    read_mr,
)


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """Pipelines must succeed (the double's default); methods set per test."""
    return make_double(clock)


@pytest.fixture(autouse=True)
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    with double.mocked(URL) as mocked:
        yield mocked


def green_mr(double: GitLabDouble, branch: str = "change-1") -> int:
    """An MR with two commits whose pipeline passed."""
    iid = double.open_mr(PROJECT, branch, author="bot", files={"b.txt": "b\n"}).iid
    double.push(PROJECT, branch, {"c.txt": "c\n"}, author="bot")
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "success")
    double.take_outgoing()
    return iid


def merge(iid: int, **params: Any) -> dict[str, Any]:
    """PUT /merge as alice, answered 200."""
    reply = call("PUT", f"/merge_requests/{iid}/merge", "alice-token", json=params)
    assert reply.status_code == 200, reply.text
    merged: dict[str, Any] = reply.json()
    return merged


def merge_hook(double: GitLabDouble) -> dict[str, Any]:
    """The `merge` MR Hook's object_attributes."""
    found = [h for h in hooks(double, "merge_request") if h["object_attributes"]["action"]]
    attrs: dict[str, Any] = next(
        h["object_attributes"] for h in found if h["object_attributes"]["action"] == "merge"
    )
    return attrs


def parents(sha: str) -> list[str]:
    """GET /repository/commits/:sha `parent_ids`."""
    found: list[str] = get_json(f"/repository/commits/{sha}")["parent_ids"]
    return found


def test_merge_method_merge_makes_a_merge_commit_reported_as_merge_commit_sha(
    double: GitLabDouble,
) -> None:
    """`merge_commit!` (repository.merge): a merge commit [target head, MR head] becomes the
    target's head and `merge_commit_sha`, in the API and in the MR Hook (a safe hook attribute,
    lib/gitlab/hook_data/merge_request_builder.rb)."""
    iid = green_mr(double)
    target, head = double.branch_head(PROJECT, "main"), read_mr(iid)["sha"]
    merged = merge(iid)
    assert merged["merge_commit_sha"] == double.branch_head(PROJECT, "main")
    assert parents(merged["merge_commit_sha"]) == [target, head]
    assert merged["squash_commit_sha"] is None
    assert merge_hook(double)["merge_commit_sha"] == merged["merge_commit_sha"]


def test_merge_method_rebase_merge_needs_an_up_to_date_head_then_makes_a_merge_commit(
    double: GitLabDouble,
) -> None:
    """Semi-linear history (`rebase_merge`): `should_be_rebased?` (ff_merge_must_be_possible?)
    makes an MR behind its target `need_rebase`; once rebased the merge still makes a merge
    commit whose first parent is the target's head."""
    double.set_merge_method(PROJECT, "rebase_merge")
    iid = green_mr(double)
    double.advance_branch(PROJECT)
    assert read_mr(iid)["detailed_merge_status"] == "need_rebase"
    assert call("PUT", f"/merge_requests/{iid}/merge", "alice-token").status_code == 422
    assert call("PUT", f"/merge_requests/{iid}/rebase").status_code == 202
    double.complete_rebase(PROJECT, iid)
    double.set_pipeline(PROJECT, head_pipeline_id(double, iid), "success")
    target, head = double.branch_head(PROJECT, "main"), read_mr(iid)["sha"]
    merged = merge(iid)
    assert parents(merged["merge_commit_sha"]) == [target, head]


def test_merge_method_ff_moves_the_target_to_the_head_with_merge_commit_sha_null(
    double: GitLabDouble,
) -> None:
    """`fast_forward!` (repository.ff_merge) returns only `commit_sha`: no merge commit, the
    target moves to the MR head, `merge_commit_sha` stays null in the API and in the MR
    Hook (MergeRequests::MergeService#commit stores only the shas the strategy returned)."""
    double.set_merge_method(PROJECT, "ff")
    iid = green_mr(double)
    head = read_mr(iid)["sha"]
    merged = merge(iid)
    assert double.branch_head(PROJECT, "main") == head
    assert (merged["merge_commit_sha"], merged["squash_commit_sha"]) == (None, None)
    attrs = merge_hook(double)
    assert attrs["merge_commit_sha"] is None
    assert attrs["last_commit"]["id"] == head


def test_squash_with_ff_reports_squash_commit_sha_in_the_api_and_not_in_the_hook(
    double: GitLabDouble,
) -> None:
    """Squashing (`squash_on_merge?`, MergeRequests::SquashService, Gitaly UserSquash: the head
    rebased onto the start commit as one commit) then fast-forward: the target moves to the
    squash commit, the API shows it as `squash_commit_sha` with `merge_commit_sha` null, and
    the MR Hook carries no `squash_commit_sha` (not among
    HookData::MergeRequestBuilder.safe_hook_attributes) and a null `merge_commit_sha`."""
    double.set_merge_method(PROJECT, "ff")
    iid = green_mr(double)
    start = double.branch_head(PROJECT, "main")
    double.set_squash(PROJECT, iid)
    merged = merge(iid)
    squash = merged["squash_commit_sha"]
    assert squash is not None
    assert merged["merge_commit_sha"] is None
    assert double.branch_head(PROJECT, "main") == squash != merged["sha"]
    assert parents(squash) == [start]
    assert double.file(PROJECT, "c.txt") == "c\n"
    attrs = merge_hook(double)
    assert "squash_commit_sha" not in attrs
    assert attrs["merge_commit_sha"] is None


def test_squash_with_merge_commit_merges_the_squash_commit(double: GitLabDouble) -> None:
    """Squashing with the `merge` method: the merge commit's parents are the target head and
    the squash commit (`repository.merge(current_user, source_sha, ...)` with source_sha the
    squash commit); both shas are in the API."""
    double.set_squash_option(PROJECT, "always")
    iid = green_mr(double)
    target = double.branch_head(PROJECT, "main")
    merged = merge(iid)
    assert merged["squash_on_merge"] is True
    assert parents(merged["merge_commit_sha"]) == [target, merged["squash_commit_sha"]]
    assert parents(merged["squash_commit_sha"]) == [target]


def test_squash_option_never_ignores_the_merge_requests_squash(double: GitLabDouble) -> None:
    """`squash_on_merge?`: `squash_never?` wins over the MR's `squash`."""
    double.set_squash_option(PROJECT, "never")
    iid = green_mr(double)
    double.set_squash(PROJECT, iid)
    merged = merge(iid)
    assert merged["squash_commit_sha"] is None
    assert merged["merge_commit_sha"] is not None
