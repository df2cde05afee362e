"""Deleting branches in the double as GitLab allows it: through the branches API (Developer;
Maintainer for a protected branch; never the default branch) and after a merge (never a
protected source branch, whoever merges; GitLab keeps it without a word).

Sources: gitlabhq lib/api/branches.rb (`delete ':id/repository/branches/:branch'`:
authorize_push_project, find_branch!, Branches::DeleteService), app/services/branches/
delete_service.rb (pre-receive refusals become 400 with their message), lib/gitlab/checks/
branch_check.rb (delete_default_branch, non_master_delete_protected_branch), lib/gitlab/
user_access.rb `can_delete_branch?` (push_to_delete_protected_branch: Maintainer),
app/models/merge_request.rb `can_remove_source_branch?` and app/services/merge_requests/
merge_service.rb `delete_source_branch?`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sim.gitlab import Access, GitLabDouble
from sim.gitlab.versions import REAL

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
P = f"{URL}/api/v4/projects/platform%2Fconfig"
DEFAULT_BRANCH = "The default branch of a project cannot be deleted."
PROTECTED = (
    "You are not allowed to delete protected branches from this project. "
    "Only a project maintainer or owner can delete a protected branch."
)


@pytest.fixture(params=REAL)
def double(request: pytest.FixtureRequest) -> Iterator[GitLabDouble]:
    """Each real release: dev (Developer, the bot's author account), maint (Maintainer), rep
    (Reporter); `gitops/*` protected with Developers allowed to push and merge."""
    d = GitLabDouble(URL, version=request.param)
    d.add_project(PROJECT, files={"a.txt": "a\n"})
    d.add_user("dev", token="dev-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("maint", token="maint-token", access={PROJECT: Access.MAINTAINER})
    d.add_user("rep", token="rep-token", access={PROJECT: Access.REPORTER})
    d.protect_branch(PROJECT, "main", push=(30,), merge=(30,))
    d.protect_branch(PROJECT, "gitops/*", push=(30,), merge=(30,))
    d.new_pipeline_status = "success"
    with d.mocked(URL):
        yield d


def call(method: str, path: str, who: str, **kw: Any) -> requests.Response:
    headers = {"PRIVATE-TOKEN": f"{who}-token"}
    return requests.request(method, f"{P}{path}", headers=headers, timeout=5, **kw)


def delete(branch: str, who: str) -> requests.Response:
    return call("DELETE", f"/repository/branches/{branch.replace('/', '%2F')}", who)


def test_a_developer_cannot_delete_a_protected_branch_a_maintainer_can(
    double: GitLabDouble,
) -> None:
    """DELETE of a protected branch by a Developer: 400 with GitLab's pre-receive message, the
    branch stays; by a Maintainer: 204, gone."""
    double.push(PROJECT, "gitops/op-1", {"b.txt": "b\n"}, author="dev")
    refused = delete("gitops/op-1", "dev")
    assert (refused.status_code, refused.json()) == (400, {"message": PROTECTED})
    assert double.branch_head(PROJECT, "gitops/op-1") is not None
    assert delete("gitops/op-1", "maint").status_code == 204
    assert double.branch_head(PROJECT, "gitops/op-1") is None


def test_branch_deletion_needs_developer_and_never_takes_the_default_branch(
    double: GitLabDouble,
) -> None:
    """A Reporter: 403 (authorize_push_project); an unprotected branch: a Developer deletes it
    (204); a missing one: 404 "404 Branch Not Found"; the default branch, even for a
    Maintainer: 400 "The default branch of a project cannot be deleted."."""
    double.push(PROJECT, "topic", {"b.txt": "b\n"}, author="dev")
    assert delete("topic", "rep").status_code == 403
    assert delete("topic", "dev").status_code == 204
    missing = delete("topic", "dev")
    assert (missing.status_code, missing.json()) == (404, {"message": "404 Branch Not Found"})
    default = delete("main", "maint")
    assert (default.status_code, default.json()) == (400, {"message": DEFAULT_BRANCH})


@pytest.mark.parametrize("merger", ["dev", "maint"])
@pytest.mark.parametrize("how", ["mr-flag", "merge-param"])
def test_a_protected_source_branch_is_kept_after_merge(
    double: GitLabDouble, merger: str, how: str
) -> None:
    """Merging an MR from a protected branch that asks for its removal (the MR's
    `remove_source_branch`, or `should_remove_source_branch` on the merge): the merge succeeds
    and the branch is kept, silently, for a Developer and a Maintainer alike
    (can_remove_source_branch? is false for any protected branch)."""
    iid = double.open_mr(
        PROJECT, "gitops/op-2", author="dev", remove_source_branch=how == "mr-flag"
    ).iid
    data = {"should_remove_source_branch": True} if how == "merge-param" else {}
    merged = call("PUT", f"/merge_requests/{iid}/merge", merger, json=data)
    assert merged.status_code == 200
    assert double.mr(PROJECT, iid).state == "merged"
    assert double.branch_head(PROJECT, "gitops/op-2") is not None


def test_an_unprotected_source_branch_is_removed_after_merge_when_asked(
    double: GitLabDouble,
) -> None:
    """An unprotected source branch is deleted after the merge when asked (by a merger who may
    push code), kept when `should_remove_source_branch` is false (it overrides the MR's flag)."""
    removed = double.open_mr(PROJECT, "topic-1", author="dev", remove_source_branch=True).iid
    kept = double.open_mr(PROJECT, "topic-2", author="dev", remove_source_branch=True).iid
    assert call("PUT", f"/merge_requests/{removed}/merge", "dev").status_code == 200
    no = {"should_remove_source_branch": False}
    assert call("PUT", f"/merge_requests/{kept}/merge", "dev", json=no).status_code == 200
    assert double.branch_head(PROJECT, "topic-1") is None
    assert double.branch_head(PROJECT, "topic-2") is not None
