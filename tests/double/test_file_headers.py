"""The double's files API headers (HEAD and GET) as GitLab sends them, and the bot's content-hash
and compare reads (`bot/gitlab/compare.py`) working against the double in-process."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import requests

from bot.core.identity import ChangedPath
from bot.gitlab import Account, Project, make_client
from bot.gitlab.compare import compare_changes, file_sha256
from sim.gitlab import Access, GitLabDouble

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
PROJECT = "platform/config"
FILE = f"{API}/projects/platform%2Fconfig/repository/files/config%2Fprod.yaml"
TOKEN = "bot-token"
PROD = "replicas: 2\n"
#: `printf 'replicas: 2\n' | git hash-object --stdin` and `| sha256sum`
PROD_BLOB = "eb5c26739ea8767a00de3d6e1932c340ce323472"
PROD_SHA256 = "e3e28ba0ad9ff6f4205af6251eb1639148ee162e2552b6819b251d59235d92dd"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project with two files and the bot as a developer, mounted in-process."""
    d = GitLabDouble(URL)
    d.add_project(
        PROJECT, files={"config/prod.yaml": PROD, "README.md": "config\n"}, protect_default=False
    )
    d.add_user("bot", token=TOKEN, access={PROJECT: Access.DEVELOPER})
    with d.mocked(URL):
        yield d


@pytest.fixture
def project(double: GitLabDouble) -> Project:
    """The project as the bot's author account sees it."""
    return Account(make_client(URL, TOKEN)).project(PROJECT)


def test_head_answers_gitlabs_file_headers_and_no_body(double: GitLabDouble) -> None:
    """HEAD of a file: every documented X-Gitlab-* header, git's blob id, and an empty body."""
    initial = double.branch_head(PROJECT, "main")
    double.advance_branch(PROJECT)  # a later commit that does not touch the file
    head = double.branch_head(PROJECT, "main")

    answer = requests.head(
        FILE, params={"ref": "main"}, headers={"PRIVATE-TOKEN": TOKEN}, timeout=5
    )

    assert answer.status_code == 200
    assert answer.content == b""
    got = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-gitlab-")}
    assert got == {
        "X-Gitlab-Blob-Id": PROD_BLOB,
        "X-Gitlab-Commit-Id": head,
        "X-Gitlab-Content-Sha256": PROD_SHA256,
        "X-Gitlab-Encoding": "base64",
        "X-Gitlab-File-Name": "prod.yaml",
        "X-Gitlab-File-Path": "config/prod.yaml",
        "X-Gitlab-Last-Commit-Id": initial,
        "X-Gitlab-Ref": "main",
        "X-Gitlab-Size": str(len(PROD)),
        "X-Gitlab-Execute-Filemode": "false",
    }


def test_get_and_raw_carry_the_same_headers(double: GitLabDouble) -> None:
    """GET (JSON) and raw send the same headers; the JSON's fields agree with them."""
    sha = double.push(PROJECT, "change", {"config/prod.yaml": "replicas: 3\n"}, start_branch="main")
    auth = {"PRIVATE-TOKEN": TOKEN}

    answer = requests.get(FILE, params={"ref": "change"}, headers=auth, timeout=5)
    raw = requests.get(f"{FILE}/raw", params={"ref": sha}, headers=auth, timeout=5)

    body = answer.json()
    assert answer.headers["X-Gitlab-Content-Sha256"] == body["content_sha256"]
    assert answer.headers["X-Gitlab-Last-Commit-Id"] == body["last_commit_id"] == sha
    assert body["blob_id"] == answer.headers["X-Gitlab-Blob-Id"]
    assert raw.text == "replicas: 3\n"
    assert raw.headers["X-Gitlab-Content-Sha256"] == hashlib.sha256(b"replicas: 3\n").hexdigest()
    assert raw.headers["X-Gitlab-Ref"] == sha


def test_head_of_a_missing_file_is_404(double: GitLabDouble) -> None:
    """HEAD of a path absent at the ref answers 404 without headers."""
    answer = requests.head(
        f"{API}/projects/platform%2Fconfig/repository/files/nope.yaml",
        params={"ref": "main"},
        headers={"PRIVATE-TOKEN": TOKEN},
        timeout=5,
    )
    assert answer.status_code == 404
    assert "X-Gitlab-Content-Sha256" not in answer.headers


def test_file_sha256_reads_the_header_with_one_head(double: GitLabDouble, project: Project) -> None:
    """The bot's file_sha256 takes the hash from one HEAD (no GET), and None for a missing file."""
    sha = double.push(PROJECT, "change", {"config/prod.yaml": "replicas: 3\n"}, start_branch="main")

    assert (
        file_sha256(project, "config/prod.yaml", sha)
        == hashlib.sha256(b"replicas: 3\n").hexdigest()
    )
    assert file_sha256(project, "config/prod.yaml", "main") == PROD_SHA256
    assert file_sha256(project, "config/gone.yaml", sha) is None
    assert double.count("HEAD", "/repository/files/") == 3
    assert double.count("GET", "/repository/files/") == 0


def test_compare_changes_lists_what_the_head_brings(double: GitLabDouble, project: Project) -> None:
    """compare_changes against the double: the head's own paths, even after main moved on."""
    double.push(PROJECT, "change", {"config/prod.yaml": "replicas: 3\n"}, start_branch="main")
    head = double.push(PROJECT, "change", {"README.md": None, "docs/new.md": "new\n"})
    double.advance_branch(PROJECT)

    comparison = compare_changes(project, "main", head)

    assert comparison.head_sha == head
    assert comparison.paths == ["README.md", "config/prod.yaml", "docs/new.md"]
    assert set(comparison.changes) == {
        ChangedPath("README.md", "README.md", deleted_file=True),
        ChangedPath("config/prod.yaml", "config/prod.yaml"),
        ChangedPath("docs/new.md", "docs/new.md", new_file=True),
    }
    assert double.count("GET", "/repository/compare") == 1
