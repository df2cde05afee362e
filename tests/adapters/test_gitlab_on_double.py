"""bot/gitlab against the stateful GitLab double: re-runs make no duplicates, GitLab's quirks
land where the rules say, and the happy path's call counts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from bot.gitlab import (
    Account,
    ApproveComponent,
    ApproveOutcome,
    MergeOutcome,
    RateLimited,
    RebaseState,
    create_change,
    ensure_hook,
    make_client,
    merge,
    read_mr,
    rebase_status,
    upsert_status_note,
)
from bot.gitlab import approve as approve_module
from bot.gitlab.approve import approve_once, unapprove
from sim.gitlab import GitLabDouble
from sim.gitlab.versions import REAL

URL = "https://gitlab.example.com"
OP = "6f1c1c52-8a4e-4c1e-9a57-0d3f3c3f0001"
FILES = [{"path": "config/prod.yaml", "content": "replicas: 3\n"}]


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A GitLab with one project, the author bot and two approval bots, mounted on responses."""
    gl = GitLabDouble(URL, mode="new")
    gl.add_project("platform/config", files={"config/prod.yaml": "replicas: 1\n"})
    gl.add_user("gitops-bot", token="author-token", access={"platform/config": 40})
    gl.add_user("approver-1", token="approver-1-token", access={"platform/config": 40})
    gl.add_user("approver-2", token="approver-2-token", access={"platform/config": 40})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gl.mount(rsps, base_url=URL)
        yield gl


def account(token: str, label: str) -> Account:
    """An account on the double."""
    return Account(make_client(URL, token, timeout=5.0), label)


def change(double: GitLabDouble) -> int:
    """Creates the operation's change as the author bot; the MR iid."""
    author = account("author-token", "author").project("platform/config")
    ref = create_change(
        author,
        operation_id=OP,
        target_branch="main",
        start_sha=double.project("platform/config").branches["main"],
        files=FILES,
        title="Scale up",
        description="",
        labels=["gitops::checking"],
    )
    return ref.mr_iid


def test_create_change_twice_makes_one_branch_commit_and_mr(double: GitLabDouble) -> None:
    """Re-running the create step after a crash reuses the branch, commit and MR."""
    first = change(double)
    calls_first = len(double.calls)
    second = change(double)
    assert first == second
    project = double.project("platform/config")
    assert len(project.mrs) == 1
    assert double.count(method="POST", path_contains="/repository/commits") == 1
    assert double.count(method="POST", path_contains="/merge_requests") == 1
    assert calls_first == 5  # list MRs, branch, file, commit (makes the branch), MR
    rerun = double.calls[calls_first:]
    assert [c.method for c in rerun if c.method != "GET"] == []


@pytest.mark.parametrize(("mode", "repeat_status"), [("old", 401), ("new", 304)])
def test_repeat_approve_counts_as_success_on_old_and_new_gitlab(
    double: GitLabDouble, mode: str, repeat_status: int
) -> None:
    """A repeat approve answered 401 (old) or 304 (new) is success once the approvals show us."""
    double.mode = mode
    iid = change(double)
    head = read_mr(account("author-token", "a").project("platform/config"), iid).sha
    approver = account("approver-1-token", "approver-1")
    double.approve_as("platform/config", iid, "approver-1")  # a lost answer: it did approve
    component = ApproveComponent()
    # the account's own read says "already": nothing is sent
    result = approve_once(approver, "platform/config", iid, head, 0, 2, component=component)
    assert result.outcome is ApproveOutcome.ALREADY
    # make the read (and its immediate resend) fail so the POST goes out and meets GitLab's
    # repeat answer
    double.fail_next(2, status=500, methods=["GET"], path_contains="/approvals")
    result = approve_once(approver, "platform/config", iid, head, 2, 2, component=component)
    assert result.outcome is ApproveOutcome.APPROVED
    assert result.status_code == repeat_status


def test_approve_pinned_to_an_old_sha_is_head_moved(double: GitLabDouble) -> None:
    """An approve for a SHA that is no longer the head is reported as a moved head."""
    iid = change(double)
    approver = account("approver-1-token", "approver-1")
    result = approve_once(
        approver, "platform/config", iid, "0" * 40, 0, 2, component=ApproveComponent()
    )
    assert result.outcome is ApproveOutcome.HEAD_MOVED


def test_behind_then_rebase_then_merge(double: GitLabDouble) -> None:
    """A fast-forward project behind its target: rebase queued, done later, then merged."""
    double.project("platform/config").merge_method = "ff"
    double.new_pipeline_status = "success"
    iid = change(double)
    double.advance_branch("platform/config", "main")
    author = account("author-token", "author").project("platform/config")
    head = read_mr(author, iid).sha
    assert merge(author, iid, head).outcome is MergeOutcome.REBASE_STARTED
    assert rebase_status(author, iid, before_sha=head).state is RebaseState.IN_PROGRESS
    double.complete_rebase("platform/config", iid, ok=True)
    done = rebase_status(author, iid, before_sha=head)
    assert done.state is RebaseState.DONE
    result = merge(author, iid, read_mr(author, iid).sha)
    assert result.outcome is MergeOutcome.MERGED
    assert merge(author, iid, read_mr(author, iid).sha).outcome is MergeOutcome.MERGED


def test_status_note_is_edited_in_place(double: GitLabDouble) -> None:
    """Posting the status twice leaves one note carrying the marker, with the second text."""
    iid = change(double)
    author = account("author-token", "author").project("platform/config")
    first = upsert_status_note(author, iid, OP, "phase: checking")
    second = upsert_status_note(author, iid, OP, "phase: merging")
    assert first == second
    notes = list(double.mr("platform/config", iid).notes.values())
    assert len(notes) == 1
    assert "phase: merging" in notes[0].body


def test_rate_limit_honours_retry_after(double: GitLabDouble) -> None:
    """A 429 becomes a transient error carrying GitLab's Retry-After, and nothing sleeps."""
    iid = change(double)
    author = account("author-token", "author").project("platform/config")
    double.fail_next(1, status=429, retry_after=17)
    with pytest.raises(RateLimited) as raised:
        read_mr(author, iid)
    assert raised.value.retry_after == 17


def test_hook_installed_twice_is_one_hook(double: GitLabDouble) -> None:
    """Installing the project's webhook again updates it in place."""
    author = account("author-token", "author").project("platform/config")
    events = ("merge_requests_events", "pipeline_events", "note_events", "deployment_events")
    ensure_hook(author, "https://bot.example.com/webhooks/gitlab", "s3cret", events)
    ensure_hook(author, "https://bot.example.com/webhooks/gitlab", "s3cret", events)
    assert len(double.project("platform/config").hooks) == 1


def test_one_approvals_read_serves_every_account(double: GitLabDouble) -> None:
    """Given the approvers read once for all accounts, an account already among them makes no
    call at all; one not among them reads nothing before approving."""
    iid = change(double)
    head = read_mr(account("author-token", "a").project("platform/config"), iid).sha
    first, second = (account(f"approver-{n}-token", f"approver-{n}") for n in (1, 2))
    first._username, second._username = "approver-1", "approver-2"
    before = len(double.calls)
    done = approve_once(
        first,
        "platform/config",
        iid,
        head,
        0,
        2,
        component=ApproveComponent(),
        approvers=frozenset({"approver-1"}),
    )
    assert done.outcome is ApproveOutcome.ALREADY
    assert len(double.calls) == before
    fresh = approve_once(
        second,
        "platform/config",
        iid,
        head,
        0,
        2,
        component=ApproveComponent(),
        approvers=frozenset({"approver-1"}),
    )
    assert fresh.outcome is ApproveOutcome.APPROVED
    assert [c.method for c in double.calls[before:]] == ["POST"]


@pytest.mark.parametrize("version", REAL)
def test_unapprove_of_an_approval_already_gone_is_taken_back_on_every_release(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approvals read lists approver-1, whose approval is gone by the time its unapprove
    arrives (a person or GitLab's reset removed it): GitLab answers 404 up to the release of
    !244481 and 304 after (lib/api/merge_request_approvals.rb). Both mean taken back: no error,
    and the account is reported as done."""
    gl = GitLabDouble(URL, version=version)
    gl.add_project("platform/config", files={"config/prod.yaml": "replicas: 1\n"})
    gl.add_user("gitops-bot", token="author-token", access={"platform/config": 40})
    gl.add_user("approver-1", token="approver-1-token", access={"platform/config": 40})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gl.mount(rsps, base_url=URL)
        iid = change(gl)
        monkeypatch.setattr(approve_module, "approved_by", lambda project, iid: {"approver-1"})
        project = account("author-token", "author").project("platform/config")
        taken = unapprove([account("approver-1-token", "approver-1")], project, iid)
    assert taken == ["approver-1"]
    (call,) = [c for c in gl.calls if c.path.endswith("/unapprove")]
    assert call.status == gl.profile.unapprove_absent
