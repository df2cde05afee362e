"""The double's compare API (`/repository/compare`) as GitLab answers it: merge-base or straight
diffs, the commits `to` brings, renames, unknown refs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sim.gitlab import Access, GitLabDouble

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
PROJECT = "platform/config"
COMPARE = f"{API}/projects/platform%2Fconfig/repository/compare"
FILES = {"config/prod.yaml": "replicas: 2\n", "README.md": "config\n"}


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project and a developer, mounted in-process."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files=FILES, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    with d.mocked(URL):
        yield d


def compare(**query: str) -> requests.Response:
    """GET the compare endpoint as the developer."""
    return requests.get(COMPARE, params=query, headers={"PRIVATE-TOKEN": "bot-token"}, timeout=5)


def paths(body: dict[str, Any]) -> list[tuple[str, str, bool, bool, bool]]:
    """(old_path, new_path, new_file, renamed_file, deleted_file) of each diff entry."""
    return [
        (d["old_path"], d["new_path"], d["new_file"], d["renamed_file"], d["deleted_file"])
        for d in body["diffs"]
    ]


def test_merge_base_compare_lists_only_what_the_branch_brings(double: GitLabDouble) -> None:
    """With main moved on, from=main to=branch shows the branch's own change and commits only."""
    double.push(PROJECT, "change", {"config/prod.yaml": "replicas: 3\n"}, start_branch="main")
    head = double.push(PROJECT, "change", {"config/new.yaml": "new: 1\n"})
    double.advance_branch(PROJECT)

    answer = compare(**{"from": "main", "to": "change"})

    assert answer.status_code == 200
    body = answer.json()
    assert paths(body) == [
        ("config/new.yaml", "config/new.yaml", True, False, False),
        ("config/prod.yaml", "config/prod.yaml", False, False, False),
    ]
    assert body["commit"]["id"] == head
    assert len(body["commits"]) == 2
    assert body["commits"][-1]["id"] == head
    assert (body["compare_timeout"], body["compare_same_ref"]) == (False, False)
    assert body["web_url"] == f"{URL}/{PROJECT}/-/compare/main...change"
    prod = body["diffs"][1]
    assert prod["diff"] == "@@ -1 +1 @@\n-replicas: 2\n+replicas: 3\n"
    assert (prod["a_mode"], prod["b_mode"]) == ("100644", "100644")
    assert body["diffs"][0]["a_mode"] == "0"


def test_straight_compare_diffs_from_itself(double: GitLabDouble) -> None:
    """straight=true diffs `from` directly: main's newer file shows as deleted on the branch."""
    double.push(PROJECT, "change", {"config/prod.yaml": "replicas: 3\n"}, start_branch="main")
    double.advance_branch(PROJECT, files={"later.txt": "later\n"})

    body = compare(**{"from": "main", "to": "change", "straight": "true"}).json()

    assert paths(body) == [
        ("config/prod.yaml", "config/prod.yaml", False, False, False),
        ("later.txt", "later.txt", False, False, True),
    ]
    assert body["diffs"][1]["b_mode"] == "0"
    assert body["diffs"][1]["diff"] == "@@ -1 +0,0 @@\n-later\n"
    assert len(body["commits"]) == 1


def test_compare_by_sha_and_rename(double: GitLabDouble) -> None:
    """SHAs (full or short) work as refs; a moved file with the same content is one rename."""
    base = double.branch_head(PROJECT, "main")
    assert base is not None
    head = double.push(PROJECT, "move", {"README.md": None, "docs/README.md": "config\n"})

    body = compare(**{"from": base[:8], "to": head}).json()

    assert paths(body) == [("README.md", "docs/README.md", False, True, False)]
    assert body["diffs"][0]["diff"] == ""
    assert body["commit"]["id"] == head


def test_same_ref_and_nothing_new(double: GitLabDouble) -> None:
    """Comparing a ref with itself: compare_same_ref, no commits, no diffs, commit null."""
    body = compare(**{"from": "main", "to": "main"}).json()
    assert (body["compare_same_ref"], body["commit"], body["commits"], body["diffs"]) == (
        True,
        None,
        [],
        [],
    )


def test_no_newline_at_end_of_file_is_marked(double: GitLabDouble) -> None:
    """Content without a final newline carries git's marker in the diff text."""
    double.push(PROJECT, "change", {"config/prod.yaml": "replicas: 3"}, start_branch="main")
    body = compare(**{"from": "main", "to": "change"}).json()
    assert body["diffs"][0]["diff"] == (
        "@@ -1 +1 @@\n-replicas: 2\n+replicas: 3\n\\ No newline at end of file\n"
    )


@pytest.mark.parametrize(
    "query",
    [
        {"from": "main", "to": "nope"},
        {"from": "nope", "to": "main"},
        {"from": "main", "to": "0" * 40},
    ],
)
def test_unknown_ref_is_404(double: GitLabDouble, query: dict[str, str]) -> None:
    """An unknown branch or SHA on either side is GitLab's `404 Ref Not Found`."""
    answer = compare(**query)
    assert answer.status_code == 404
    assert answer.json() == {"message": "404 Ref Not Found"}


def test_missing_parameter_is_400(double: GitLabDouble) -> None:
    """Without `to` the API answers Grape's 400."""
    answer = compare(**{"from": "main"})
    assert answer.status_code == 400
    assert answer.json() == {"error": "to is missing"}


def test_compare_through_the_real_server() -> None:
    """The same answer over HTTP from the threaded server (the e2e stack's transport)."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files=FILES, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.push(PROJECT, "change", {"a.txt": "a\n"}, start_branch="main")
    with d.serve() as base:
        answer = requests.get(
            f"{base}/api/v4/projects/platform%2Fconfig/repository/compare",
            params={"from": "main", "to": "change"},
            headers={"PRIVATE-TOKEN": "bot-token"},
            timeout=5,
        )
    assert [e["new_path"] for e in answer.json()["diffs"]] == ["a.txt"]


def mr_diff_paths(iid: int) -> list[tuple[str, str, bool, bool, bool]]:
    """The MR's `/diffs` entries as (old, new, new_file, renamed, deleted)."""
    answer = requests.get(
        f"{API}/projects/platform%2Fconfig/merge_requests/{iid}/diffs",
        headers={"PRIVATE-TOKEN": "bot-token"},
        timeout=5,
    )
    return paths({"diffs": answer.json()})


def test_mr_diffs_stay_the_mrs_own_change_when_the_target_moves(double: GitLabDouble) -> None:
    """An MR's /diffs lists its own change only, even after main moved on, and after the merge."""
    double.project(PROJECT).merge_method = "ff"
    double.new_pipeline_status = "success"
    iid = double.open_mr(PROJECT, "change", author="bot", files={"README.md": None}).iid
    double.advance_branch(PROJECT, files={"later.txt": "later\n"})
    moved = mr_diff_paths(iid)
    double.force_push(PROJECT, "change", {"README.md": None})  # onto main: fast-forwardable
    requests.put(
        f"{API}/projects/platform%2Fconfig/merge_requests/{iid}/merge",
        headers={"PRIVATE-TOKEN": "bot-token"},
        timeout=5,
    ).raise_for_status()

    assert moved == [("README.md", "README.md", False, False, True)]
    assert mr_diff_paths(iid) == [("README.md", "README.md", False, False, True)]
