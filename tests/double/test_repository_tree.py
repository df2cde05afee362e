"""The double's repository tree, CI/CD setting and private projects, as GitLab answers them:
`GET /projects/:id/repository/tree` (lib/api/repositories.rb: `path`, `ref`, `recursive`,
offset pagination with `Link` headers, 404 "Tree Not Found"), `ci_config_path` in
`GET /projects/:id` (lib/api/entities/project.rb), `ref=HEAD` as the default branch, and a
private project answering 404 "Project Not Found" to a non-member."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from sim.gitlab import Access, GitLabDouble

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4/projects/platform%2Fconfig"
TOKEN = "bot-token"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project with files in nested directories, the bot a developer, mounted in-process."""
    d = GitLabDouble(URL)
    files = {"a.yml": "a\n", "ci/b.yml": "b\n", "ci/deep/c.yml": "c\n", "docs/x.md": "x\n"}
    d.add_project("platform/config", files=files)
    d.add_user("bot", token=TOKEN, access={"platform/config": Access.DEVELOPER})
    with d.mocked(URL):
        yield d


def get(url: str, **params: str) -> requests.Response:
    """One GET as the bot."""
    return requests.get(url, params=params, headers={"PRIVATE-TOKEN": TOKEN}, timeout=5)


def test_the_tree_lists_one_level_or_every_level(double: GitLabDouble) -> None:
    """Without `recursive` one level (directories as `tree`), with it every entry below."""
    top = get(f"{API}/repository/tree").json()
    assert [(e["path"], e["type"]) for e in top] == [
        ("a.yml", "blob"),
        ("ci", "tree"),
        ("docs", "tree"),
    ]
    under = get(f"{API}/repository/tree", path="ci", recursive="true").json()
    assert [(e["path"], e["type"], e["name"]) for e in under] == [
        ("ci/b.yml", "blob", "b.yml"),
        ("ci/deep", "tree", "deep"),
        ("ci/deep/c.yml", "blob", "c.yml"),
    ]


def test_the_tree_at_a_commit_is_that_commits(double: GitLabDouble) -> None:
    """A later push does not change the tree of the earlier commit."""
    before = double.branch_head("platform/config", "main")
    assert before is not None
    double.push("platform/config", "main", {"ci/new.yml": "n\n"})
    paths = [e["path"] for e in get(f"{API}/repository/tree", ref=before, path="ci").json()]
    assert paths == ["ci/b.yml", "ci/deep"]


def test_pages_link_to_the_next_with_the_encoded_project(double: GitLabDouble) -> None:
    """Two entries a page: `Link` names the next page with `platform%2Fconfig` as one segment,
    and following it gives the rest."""
    first = get(f"{API}/repository/tree", recursive="true", per_page="2")
    assert first.headers["X-Total"] == "7"
    assert first.headers["X-Next-Page"] == "2"
    following = first.links["next"]["url"]
    assert "/projects/platform%2Fconfig/repository/tree?" in following
    assert "recursive=true" in following
    second = requests.get(following, headers={"PRIVATE-TOKEN": TOKEN}, timeout=5)
    assert [e["path"] for e in second.json()] == ["ci/b.yml", "ci/deep"]


@pytest.mark.parametrize(("path", "ref"), [("nowhere", "main"), ("ci", "no-such-ref")])
def test_an_unknown_directory_or_ref_is_tree_not_found(
    double: GitLabDouble, path: str, ref: str
) -> None:
    """404 with GitLab's message."""
    answer = get(f"{API}/repository/tree", path=path, ref=ref)
    assert (answer.status_code, answer.json()) == (404, {"message": "404 Tree Not Found"})


def test_head_names_the_default_branch(double: GitLabDouble) -> None:
    """`ref=HEAD` reads the default branch's head, as Gitaly resolves it."""
    answer = get(f"{API}/repository/files/ci%2Fb.yml/raw", ref="HEAD")
    assert (answer.status_code, answer.text) == (200, "b\n")


def test_the_project_shows_its_ci_config_path(double: GitLabDouble) -> None:
    """null when unset; the setting once set."""
    assert get(API).json()["ci_config_path"] is None
    double.set_ci_config_path("platform/config", "ci/main.yml@platform/ci:stable")
    assert get(API).json()["ci_config_path"] == "ci/main.yml@platform/ci:stable"


def test_a_private_project_is_not_found_for_a_non_member(double: GitLabDouble) -> None:
    """GitLab does not say a private project exists to someone who may not see it; a member
    reads it."""
    double.add_project("secret/ci", files={"ci.yml": "x\n"}, visibility="private")
    secret = f"{URL}/api/v4/projects/secret%2Fci"
    for url in (secret, f"{secret}/repository/files/ci.yml/raw?ref=main"):
        answer = get(url)
        assert (answer.status_code, answer.json()) == (404, {"message": "404 Project Not Found"})
    double.add_member("secret/ci", "bot", Access.REPORTER)
    assert get(secret).json()["visibility"] == "private"
