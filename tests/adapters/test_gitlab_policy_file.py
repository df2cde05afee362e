"""bot/gitlab/policy_file.py on the GitLab double: the policy file at a branch's head with the
commit it was read at, in one read whether the file is there or not (GitLab's 404 says which of
the file and the branch is missing); a 404 that says neither costs a read of the branch."""

from __future__ import annotations

import pytest
import responses
from responses import matchers

from bot.gitlab import Account, Project, make_client
from bot.gitlab.policy_file import NoSuchBranch, read_file_at_head
from sim.gitlab import GitLabDouble
from tests.adapters.conftest import PROJECT, URL

POLICY = ".gitops/bot.yml"


def project() -> Project:
    """The project as the author bot sees it."""
    return Account(make_client(URL, "author-token", timeout=5.0)).project(PROJECT)


def test_the_file_and_its_commit_in_one_read(double: GitLabDouble) -> None:
    """Present: its bytes and the branch's head, one GET."""
    head = double.push(PROJECT, "main", {POLICY: "version: 1\n"})
    before = len(double.calls)
    found = read_file_at_head(project(), POLICY, "main")
    assert (found.sha, found.content) == (head, b"version: 1\n")
    assert len(double.calls) - before == 1


def test_no_file_is_one_read_and_no_commit(double: GitLabDouble) -> None:
    """Absent: GitLab's `404 File Not Found` says the branch is there; no content, no commit
    (the branch is not read: one GET in all)."""
    before = len(double.calls)
    found = read_file_at_head(project(), POLICY, "main")
    assert (found.sha, found.content) == (None, None)
    calls = double.calls[before:]
    assert [(c.method, c.path.endswith("/repository/files/.gitops/bot.yml")) for c in calls] == [
        ("GET", True)
    ]


def test_an_unknown_404_falls_back_to_reading_the_branch(double: GitLabDouble) -> None:
    """A 404 whose message names neither the file nor the commit (a proxy, an older GitLab):
    the branch is read for the head the absence was seen at (two GETs)."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        rsps.add(
            responses.GET,
            f"{URL}/api/v4/projects/platform%2Fconfig/repository/files/.gitops%2Fbot.yml",
            status=404,
            json={"message": "404 Not Found"},
            match=[matchers.query_param_matcher({"ref": "main"})],
        )
        rsps.add(
            responses.GET,
            f"{URL}/api/v4/projects/platform%2Fconfig/repository/branches/main",
            json={"name": "main", "commit": {"id": "a" * 40}},
        )
        found = read_file_at_head(project(), POLICY, "main")
    assert (found.sha, found.content) == ("a" * 40, None)


def test_no_such_branch(double: GitLabDouble) -> None:
    """A target branch that does not exist (`404 Commit Not Found`) is said so, not taken for
    "no policy", in one read."""
    before = len(double.calls)
    with pytest.raises(NoSuchBranch):
        read_file_at_head(project(), POLICY, "nowhere")
    assert len(double.calls) - before == 1
