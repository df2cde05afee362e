"""The double's files API 404s as GitLab answers them (lib/api/files.rb: `not_found!('Commit')
unless @commit`, then `not_found!('File') unless @blob`): `{"message": "404 Commit Not Found"}`
for a ref that names no commit, `{"message": "404 File Not Found"}` for a path with no file at
that commit, on the file, its raw content and its HEAD. The bot tells a missing policy file from
a missing branch by these messages (bot/gitlab/policy_file.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from sim.gitlab import Access, GitLabDouble

URL = "https://gitlab.example.com"
FILES = f"{URL}/api/v4/projects/platform%2Fconfig/repository/files"
TOKEN = "bot-token"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project with one file and the bot as a developer, mounted in-process."""
    d = GitLabDouble(URL)
    d.add_project(
        "platform/config", files={"config/prod.yaml": "replicas: 1\n"}, protect_default=False
    )
    d.add_user("bot", token=TOKEN, access={"platform/config": Access.DEVELOPER})
    with d.mocked(URL):
        yield d


def get(path: str, ref: str, *, method: str = "GET") -> requests.Response:
    """One files API call as the bot."""
    return requests.request(
        method,
        f"{FILES}/{path}",
        params={"ref": ref},
        headers={"PRIVATE-TOKEN": TOKEN},
        timeout=5,
    )


@pytest.mark.parametrize("suffix", ["", "/raw"])
@pytest.mark.parametrize(
    ("path", "ref", "message"),
    [
        (".gitops%2Fbot.yml", "main", "404 File Not Found"),
        ("config%2Fprod.yaml", "nowhere", "404 Commit Not Found"),
        (".gitops%2Fbot.yml", "nowhere", "404 Commit Not Found"),  # the ref is looked at first
        ("config%2Fprod.yaml", "0" * 40, "404 Commit Not Found"),
    ],
)
def test_missing_file_and_missing_ref_say_which(
    double: GitLabDouble, suffix: str, path: str, ref: str, message: str
) -> None:
    """404 with GitLab's JSON body, naming what is missing; nothing else in it."""
    answer = get(path + suffix, ref)
    assert answer.status_code == 404
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.json() == {"message": message}


def test_head_of_a_missing_file_is_a_bare_404(double: GitLabDouble) -> None:
    """HEAD answers the status alone (the bot's existence checks use it)."""
    answer = get(".gitops%2Fbot.yml", "main", method="HEAD")
    assert (answer.status_code, answer.content) == (404, b"")


def test_the_file_at_an_existing_ref_is_found(double: GitLabDouble) -> None:
    """The control: the same calls find the file that is there, with the head's commit."""
    answer = get("config%2Fprod.yaml", "main")
    assert answer.status_code == 200
    assert answer.json()["commit_id"] == double.branch_head("platform/config", "main")
