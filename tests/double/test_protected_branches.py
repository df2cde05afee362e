"""The double's protected branches API (Premium and CE) and GitLab's refusals that follow from it:
commits, branch creation and deletion, merges, rebases and people's pushes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sim.gitlab import Access, ApiError, GitLabDouble

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4/projects/platform%2Fconfig"
PROJECT = "platform/config"
RULES = f"{API}/protected_branches"
BOT_RULE = f"{RULES}/gitops%2F%2A"
TOKENS = {"author": "author-token", "alice": "alice-token", "dev": "dev-token"}


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project; the bot's author account and alice as Maintainers, dev as a Developer."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files={"config/prod.yaml": "replicas: 2\n"}, protect_default=False)
    d.add_user("author", token=TOKENS["author"], access={PROJECT: Access.MAINTAINER})
    d.add_user("alice", token=TOKENS["alice"], access={PROJECT: Access.MAINTAINER})
    d.add_user("dev", token=TOKENS["dev"], access={PROJECT: Access.DEVELOPER})
    d.add_user("stranger", token="stranger-token")
    with d.mocked(URL):
        yield d


def call(method: str, url: str, who: str = "author", **kwargs: Any) -> requests.Response:
    """One API call as `who`."""
    headers = {"PRIVATE-TOKEN": TOKENS.get(who, f"{who}-token")}
    return requests.request(method, url, headers=headers, timeout=5, **kwargs)


def protect_for_author(double: GitLabDouble) -> dict[str, Any]:
    """POST gitops/* so that only the author account may push and merge (Premium's way)."""
    author = double.user("author").id
    body = {
        "name": "gitops/*",
        "allowed_to_push": [{"user_id": author}],
        "allowed_to_merge": [{"user_id": author}],
    }
    answer = call("POST", RULES, json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def commit(who: str, branch: str, **extra: str) -> requests.Response:
    """POST one commit updating config/prod.yaml on `branch`."""
    body = {
        "branch": branch,
        "commit_message": "change",
        "actions": [{"action": "update", "file_path": "config/prod.yaml", "content": "x: 1\n"}],
        **extra,
    }
    return call("POST", f"{API}/repository/commits", who, json=body)


def test_premium_rule_for_one_user_reads_back_as_gitlab_renders_it(double: GitLabDouble) -> None:
    """POST with user entries: per-user push and merge lists, Maintainers may unprotect."""
    author = double.user("author").id
    created = protect_for_author(double)

    assert created["name"] == "gitops/*"
    assert [
        (e["access_level"], e["user_id"], e["group_id"]) for e in created["push_access_levels"]
    ] == [(None, author, None)]
    assert created["push_access_levels"][0]["access_level_description"] == "Author"
    assert [e["user_id"] for e in created["merge_access_levels"]] == [author]
    assert [e["access_level"] for e in created["unprotect_access_levels"]] == [40]
    assert (created["allow_force_push"], created["inherited"]) == (False, False)
    assert call("GET", BOT_RULE, "dev").json() == created
    assert call("GET", f"{RULES}/gitops%2F*", "dev").json() == created
    assert [r["name"] for r in call("GET", RULES, params={"search": "gitops"}).json()] == [
        "gitops/*"
    ]
    assert call("GET", RULES, params={"search": "release"}).json() == []


def test_only_the_allowed_user_may_commit_or_create_there(double: GitLabDouble) -> None:
    """Under gitops/* a Maintainer who is not listed gets GitLab's 403 (commit) or 400 (branch)."""
    protect_for_author(double)

    refused = commit("alice", "gitops/op-1", start_branch="main")
    created = call(
        "POST", f"{API}/repository/branches", "alice", json={"branch": "gitops/x", "ref": "main"}
    )
    allowed = commit("author", "gitops/op-1", start_branch="main")

    assert refused.status_code == 403
    assert refused.json() == {
        "message": "403 Forbidden - You are not allowed to push into this branch"
    }
    assert created.status_code == 400
    assert created.json() == {
        "message": "You are not allowed to create protected branches on this project."
    }
    assert allowed.status_code == 201
    assert double.branch_head(PROJECT, "gitops/x") is None
    assert commit("alice", "feature/free", start_branch="main").status_code == 201


def test_people_cannot_push_or_force_push_onto_a_protected_branch(double: GitLabDouble) -> None:
    """A person's push to gitops/* fails unless allowed; a force push needs allow_force_push too."""
    protect_for_author(double)
    double.push(PROJECT, "gitops/op-1", {"a": "1\n"}, author="author")

    with pytest.raises(ApiError) as push:
        double.push(PROJECT, "gitops/op-1", {".gitlab-ci.yml": "x\n"}, author="alice")
    with pytest.raises(ApiError) as rewrite:
        double.force_push(PROJECT, "gitops/op-1", {"a": "2\n"}, author="author")

    assert (push.value.status, push.value.message) == (
        403,
        "You are not allowed to push code to protected branches on this project.",
    )
    assert (
        rewrite.value.message
        == "You are not allowed to force push code to a protected branch on this project."
    )
    assert double.file(PROJECT, ".gitlab-ci.yml", "gitops/op-1") is None
    assert (
        call("PATCH", BOT_RULE, json={"allow_force_push": True}).json()["allow_force_push"] is True
    )
    double.force_push(PROJECT, "gitops/op-1", {"a": "2\n"}, author="author")
    assert double.file(PROJECT, "a", "gitops/op-1") == "2\n"


def test_merge_into_a_protected_target_and_rebase_of_a_protected_source(
    double: GitLabDouble,
) -> None:
    """Merging into a branch only the author may merge: 401 for others; rebasing gitops/*: 403."""
    double.new_pipeline_status = "success"
    protect_for_author(double)
    double.protect_branch(PROJECT, "main", push=(0,), merge=("author",))
    double.push(PROJECT, "gitops/op-1", {"a": "1\n"}, author="author")
    iid = double.open_mr(PROJECT, "gitops/op-1", author="author").iid
    mr = f"{API}/merge_requests/{iid}"

    assert call("PUT", f"{mr}/rebase", "alice").json() == {
        "merge_error": "Cannot push to source branch"
    }
    rebase = call("PUT", f"{mr}/rebase")
    assert (rebase.status_code, rebase.json()) == (
        403,
        {"merge_error": "Source branch is protected from force push"},
    )
    merge = call("PUT", f"{mr}/merge", "alice")
    assert (merge.status_code, merge.json()) == (401, {"message": "401 Unauthorized"})
    assert double.mr(PROJECT, iid).state == "opened"
    assert call("PUT", f"{mr}/merge", json={"should_remove_source_branch": True}).status_code == 200
    assert double.mr(PROJECT, iid).state == "merged"
    # GitLab never removes a protected source branch on merge, whoever merges (a Maintainer
    # here): MergeRequest#can_remove_source_branch? is false for it. It is kept without a word;
    # deleting it takes a Maintainer's DELETE of the branch.
    assert double.branch_head(PROJECT, "gitops/op-1") is not None
    deleted = call("DELETE", f"{API}/repository/branches/gitops%2Fop-1")
    assert deleted.status_code == 204
    assert double.branch_head(PROJECT, "gitops/op-1") is None


def test_deleting_a_protected_branch_needs_a_maintainer(double: GitLabDouble) -> None:
    """A Developer's delete of a protected branch is GitLab's 400; a Maintainer's works."""
    double.push(PROJECT, "release/1", {"r": "1\n"})
    double.protect_branch(PROJECT, "release/*", push=(30,), merge=(30,))

    refused = call("DELETE", f"{API}/repository/branches/release%2F1", "dev")

    assert refused.status_code == 400
    assert refused.json()["message"].startswith("You are not allowed to delete protected branches")
    assert call("DELETE", f"{API}/repository/branches/release%2F1", "alice").status_code == 204


def test_wildcards_match_nested_names_only_under_the_prefix(double: GitLabDouble) -> None:
    """`gitops/*` protects gitops/a/b but not gitopsx; the branches API shows `protected`."""
    protect_for_author(double)
    double.push(PROJECT, "gitops/a/b", {"a": "1\n"}, author="author")
    double.push(PROJECT, "gitopsx", {"a": "1\n"}, author="alice")
    branches = {b["name"]: b["protected"] for b in call("GET", f"{API}/repository/branches").json()}
    assert branches == {"gitops/a/b": True, "gitopsx": False, "main": False}
    assert commit("alice", "gitops/a/b").status_code == 403


def test_patch_destroys_and_adds_entries_by_id(double: GitLabDouble) -> None:
    """PATCH removes an entry with `{id, _destroy}`, adds a user and changes a level by id."""
    double.protect_branch(PROJECT, "gitops/*", push=(30,), merge=(30, 40))
    rule = call("GET", BOT_RULE).json()
    push_id = rule["push_access_levels"][0]["id"]
    merge_ids = [e["id"] for e in rule["merge_access_levels"]]
    author = double.user("author").id

    answer = call(
        "PATCH",
        BOT_RULE,
        json={
            "allowed_to_push": [{"id": push_id, "_destroy": True}, {"user_id": author}],
            "allowed_to_merge": [
                {"id": merge_ids[0], "access_level": 0},
                {"id": merge_ids[1], "_destroy": True},
            ],
        },
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [(e["access_level"], e["user_id"]) for e in body["push_access_levels"]] == [
        (None, author)
    ]
    assert [(e["id"], e["access_level"]) for e in body["merge_access_levels"]] == [
        (merge_ids[0], 0)
    ]
    assert body["merge_access_levels"][0]["access_level_description"] == "No one"
    assert commit("dev", "gitops/x", start_branch="main").status_code == 403


def test_api_refusals(double: GitLabDouble) -> None:
    """409 for a duplicate, 403 for a Developer, 422 for a non-member, 400 for a bad level, 404s."""
    protect_for_author(double)
    stranger = double.user("stranger").id

    assert call("POST", RULES, json={"name": "gitops/*"}).json() == {
        "message": "Protected branch 'gitops/*' already exists"
    }
    assert call("POST", RULES, "dev", json={"name": "x"}).status_code == 403
    bad_user = call("POST", RULES, json={"name": "y", "allowed_to_push": [{"user_id": stranger}]})
    assert (bad_user.status_code, bad_user.json()) == (
        422,
        {"message": ["Cannot add users or groups unless they have access to the project"]},
    )
    assert call("POST", RULES, json={"name": "z", "push_access_level": 20}).status_code == 400
    assert call("POST", RULES, json={}).json() == {"error": "name is missing"}
    assert call("PATCH", BOT_RULE, "dev", json={"allow_force_push": True}).status_code == 403
    missing = call("GET", f"{RULES}/nope")
    assert (missing.status_code, missing.json()) == (404, {"message": "404 Not found"})
    assert call("DELETE", BOT_RULE, "dev").status_code == 403
    assert call("DELETE", BOT_RULE).status_code == 204
    assert call("GET", BOT_RULE).status_code == 404
    assert commit("alice", "gitops/free", start_branch="main").status_code == 201


def test_ce_ignores_per_user_entries_and_falls_back_to_maintainers(double: GitLabDouble) -> None:
    """On CE a per-user POST gives Maintainers (the default); the answer has no user_id keys."""
    double.edition = "ce"
    created = protect_for_author(double)

    assert created == {
        "id": created["id"],
        "name": "gitops/*",
        "push_access_levels": [
            {
                "id": created["push_access_levels"][0]["id"],
                "access_level": 40,
                "access_level_description": "Maintainers",
            }
        ],
        "merge_access_levels": [
            {
                "id": created["merge_access_levels"][0]["id"],
                "access_level": 40,
                "access_level_description": "Maintainers",
            }
        ],
        "allow_force_push": False,
        "code_owner_approval_required": False,
    }
    assert commit("alice", "gitops/op-1", start_branch="main").status_code == 201  # any Maintainer
    assert commit("dev", "gitops/op-2", start_branch="main").status_code == 403
    entry = created["push_access_levels"][0]["id"]
    patched = call(
        "PATCH",
        BOT_RULE,
        json={"allowed_to_push": [{"id": entry, "_destroy": True}], "allow_force_push": True},
    )
    assert [e["access_level"] for e in patched.json()["push_access_levels"]] == [40]
    assert patched.json()["allow_force_push"] is True


def test_ce_does_not_honour_user_entries_made_elsewhere(double: GitLabDouble) -> None:
    """A user entry (from a Premium past) lets nobody push on CE: only roles count there."""
    double.protect_branch(PROJECT, "gitops/*", push=("author",), merge=("author",))
    double.edition = "ce"
    assert commit("author", "gitops/op-1", start_branch="main").status_code == 403
    double.edition = "premium"
    assert commit("author", "gitops/op-1", start_branch="main").status_code == 201
