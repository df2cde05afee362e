"""bot/gitlab/policy_file.py on the GitLab double: a target branch read once for its head commit,
protection and default flag; a repository file read at that commit, never at the branch's name
(a tag named like the branch would shadow it)."""

from __future__ import annotations

import pytest
import responses
from responses import matchers

from bot.gitlab import Account, GitLabUnavailable, Project, make_client
from bot.gitlab.policy_file import NoSuchBranch, read_branch, read_file_at
from sim.gitlab import GitLabDouble
from tests.adapters.conftest import PROJECT, URL

POLICY = ".gitops/bot.yml"
FILES_URL = f"{URL}/api/v4/projects/platform%2Fconfig/repository/files/.gitops%2Fbot.yml"


def project() -> Project:
    """The project as the author bot sees it."""
    return Account(make_client(URL, "author-token", timeout=5.0)).project(PROJECT)


def test_the_branch_its_head_and_protection_in_one_read(double: GitLabDouble) -> None:
    """The default branch: its head commit, protected (GitLab protects it when it is created),
    and the default; one GET."""
    head = double.push(PROJECT, "main", {POLICY: "version: 1\n"})
    before = len(double.calls)
    branch = read_branch(project(), "main")
    assert (branch.sha, branch.protected, branch.default) == (head, True, True)
    assert len(double.calls) - before == 1


def test_an_unprotected_branch_says_so(double: GitLabDouble) -> None:
    """A branch anyone with Developer access pushes to is read as not protected."""
    double.push(PROJECT, "feature", {"x.txt": "x\n"})
    branch = read_branch(project(), "feature")
    assert (branch.protected, branch.default) == (False, False)


def test_a_tag_named_like_the_branch_does_not_shadow_it(double: GitLabDouble) -> None:
    """A tag `main` on an attacker's commit: the branch read still gives the branch's head, and
    the file read at that commit gives the branch's content (a read at the name `main` would
    give the tag's)."""
    evil = double.push(PROJECT, "attack", {POLICY: "version: 1\nmerge_queue: {enabled: false}\n"})
    double.add_tag(PROJECT, "main", evil)
    branch = read_branch(project(), "main")
    assert branch.sha != evil
    assert read_file_at(project(), POLICY, branch.sha) is None
    by_name = project().gl.http_get(
        f"/projects/{PROJECT.replace('/', '%2F')}/repository/files/.gitops%2Fbot.yml",
        query_data={"ref": "main"},
    )
    assert isinstance(by_name, dict)
    assert by_name["commit_id"] == evil  # what a name would read


def test_the_file_at_a_commit_in_one_read(double: GitLabDouble) -> None:
    """Present: its bytes, one GET; absent: None, one GET (GitLab's `404 File Not Found`)."""
    head = double.push(PROJECT, "main", {POLICY: "version: 1\n"})
    before = len(double.calls)
    assert read_file_at(project(), POLICY, head) == b"version: 1\n"
    assert read_file_at(project(), "nothing.yml", head) is None
    assert len(double.calls) - before == 2


def test_an_unknown_404_is_no_file(double: GitLabDouble) -> None:
    """A 404 whose message names neither the commit nor the project (a proxy, an older GitLab)
    counts as no file: the operator's values hold, which a policy file could only tighten."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        rsps.add(
            responses.GET,
            FILES_URL,
            status=404,
            json={"message": "404 Not Found"},
            match=[matchers.query_param_matcher({"ref": "a" * 40})],
        )
        assert read_file_at(project(), POLICY, "a" * 40) is None


def test_a_commit_gone_is_a_failed_read(double: GitLabDouble) -> None:
    """`404 Commit Not Found` for the commit just read is GitLab unavailable, not "no file"."""
    with pytest.raises(GitLabUnavailable):
        read_file_at(project(), POLICY, "f" * 40)


def test_no_such_branch(double: GitLabDouble) -> None:
    """A target branch that does not exist is said so in one read."""
    before = len(double.calls)
    with pytest.raises(NoSuchBranch):
        read_branch(project(), "nowhere")
    assert len(double.calls) - before == 1
