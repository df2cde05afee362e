"""create_change's calls on the GitLab double: a fresh run (nothing of the operation can exist)
writes at once, without reading its branch or looking for an MR; a re-run after a crash at any
point still finds the commit and MR an earlier run made, and makes no second one."""

from __future__ import annotations

import pytest

from bot.gitlab import BranchNotOurs, ChangeRef, create_change
from bot.gitlab.changes import branch_name, commit_message
from bot.gitlab.policy_file import read_branch
from sim.gitlab import GitLabDouble
from tests.adapters.test_gitlab_policy_file import PROJECT, project

OP = "6f1c1c52-8a4e-4c1e-9a57-0d3f3c3f0002"
FILES = [
    {"path": "config/prod.yaml", "content": "replicas: 3\n"},
    {"path": "config/new.yaml", "content": "replicas: 1\n"},
]


def main_head() -> str:
    """main's head commit as the author bot reads it (the commit a change starts from)."""
    return read_branch(project(), "main").sha


def create(*, fresh: bool, base: str | None = None) -> ChangeRef:
    """The operation's change, as the create step makes it."""
    return create_change(
        project(),
        operation_id=OP,
        target_branch="main",
        start_sha=base or main_head(),
        files=FILES,
        title="Scale up",
        description="",
        labels=["gitops::checking"],
        fresh=fresh,
    )


def calls_since(double: GitLabDouble, start: int) -> list[str]:
    """The calls the double answered since `start`, as "METHOD path-after-the-project"."""
    return [f"{c.method} {c.path.split(f'/{PROJECT}/', 1)[-1]}" for c in double.calls[start:]]


def our_commit_left(double: GitLabDouble) -> str:
    """The operation's branch with its commit (our trailer), as a run that crashed before
    opening the MR left it; the commit's sha."""
    return double.push(
        PROJECT,
        branch_name(OP),
        {"config/prod.yaml": "replicas: 3\n"},
        author="gitops-bot",
        message=commit_message("Scale up", OP),
        start_branch="main",
    )


def test_a_fresh_run_writes_without_reading_its_branch_or_mrs(double: GitLabDouble) -> None:
    """One existence check per file, the commit (which makes the branch), the MR: four calls,
    no read of the branch nor of the MR list; the commit is the one this run wrote."""
    base = main_head()
    start = len(double.calls)
    ref = create(fresh=True, base=base)
    assert calls_since(double, start) == [
        "HEAD repository/files/config/prod.yaml",
        "HEAD repository/files/config/new.yaml",
        "POST repository/commits",
        "POST merge_requests",
    ]
    assert ref.wrote_commit is True
    assert double.mr(PROJECT, ref.mr_iid).sha == ref.commit_sha


def test_a_rerun_after_the_fresh_run_finds_its_commit_and_mr(double: GitLabDouble) -> None:
    """A crash after the MR was opened: the next run (not fresh) reads the MR list and the
    branch, and writes nothing."""
    first = create(fresh=True)
    start = len(double.calls)
    again = create(fresh=False)
    assert (again.commit_sha, again.mr_iid, again.created) == (
        first.commit_sha,
        first.mr_iid,
        False,
    )
    assert [c for c in calls_since(double, start) if not c.startswith("GET ")] == []
    assert len(double.project(PROJECT).mrs) == 1
    assert double.count("POST", path_contains="/repository/commits") == 1


def test_a_rerun_after_a_crash_before_the_mr_opens_only_the_mr(double: GitLabDouble) -> None:
    """A crash between the commit and the MR: the next run finds the commit by its trailer and
    opens the MR on it; still one commit."""
    sha = our_commit_left(double)
    ref = create(fresh=False)
    assert (ref.commit_sha, ref.wrote_commit) == (sha, False)
    assert double.count("POST", path_contains="/repository/commits") == 0
    assert double.mr(PROJECT, ref.mr_iid).sha == sha


def test_a_fresh_run_finding_its_branch_there_reuses_our_commit(double: GitLabDouble) -> None:
    """The branch exists after all with our trailer: GitLab refuses the commit (the branch
    exists), the branch is read, the commit reused, the MR opened on it: no second commit."""
    sha = our_commit_left(double)
    ref = create(fresh=True)
    assert (ref.commit_sha, ref.wrote_commit) == (sha, False)
    assert double.project(PROJECT).branches[branch_name(OP)] == sha
    assert double.count("POST", path_contains="/repository/commits", status=201) == 0
    assert len(double.project(PROJECT).mrs) == 1


def test_a_fresh_run_never_writes_on_a_branch_that_is_not_ours(double: GitLabDouble) -> None:
    """The branch exists without our trailer: refused, the branch left as it was, no MR."""
    sha = double.push(PROJECT, branch_name(OP), {"config/prod.yaml": "x\n"}, start_branch="main")
    with pytest.raises(BranchNotOurs):
        create(fresh=True)
    assert double.project(PROJECT).branches[branch_name(OP)] == sha
    assert double.project(PROJECT).mrs == {}
