"""The GitLab double: python-gitlab and requests against its REST subset, faults and webhooks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import gitlab
import pytest
import requests
import responses
from gitlab.v4.objects import Project as GlProject

from sim.gitlab import Access, GitLabDouble

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
PROJECT = "platform/config"
FILES = {"config/prod.yaml": "replicas: 2\n", "README.md": "config\n"}
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def double() -> GitLabDouble:
    """A double with one project needing one approval, and users of every kind."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files=FILES, required_approvals=1, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("alice", token="alice-token", access={PROJECT: Access.MAINTAINER})
    d.add_user("rita", token="rita-token", access={PROJECT: Access.REPORTER})
    d.add_user("outsider", token="outsider-token")
    return d


@pytest.fixture
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    """The double mounted on a `responses` mock for the whole test."""
    with double.mocked(URL) as mocked:
        yield mocked


def client(token: str = "bot-token") -> gitlab.Gitlab:
    """A python-gitlab client for the double (no transient retries, so faults show)."""
    return gitlab.Gitlab(URL, private_token=token)


@pytest.fixture
def project(mock: responses.RequestsMock) -> GlProject:
    """The project as the bot sees it through python-gitlab."""
    return client().projects.get(PROJECT)


def open_change(double: GitLabDouble, branch: str = "change-1", content: str = "3") -> int:
    """A person opens an MR changing config/prod.yaml; returns its iid."""
    files = {"config/prod.yaml": f"replicas: {content}\n"}
    return double.open_mr(PROJECT, branch, author="bot", files=files).iid


def make_mergeable(double: GitLabDouble, iid: int) -> None:
    """Passes the MR's pipeline and has alice approve it."""
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    double.set_pipeline(PROJECT, pipeline.id, "success")
    double.approve_as(PROJECT, iid, "alice")


def test_branch_commit_and_mr_through_python_gitlab(
    double: GitLabDouble, project: GlProject
) -> None:
    """python-gitlab creates a branch, commits create/update actions on it and opens an MR."""
    project.branches.create({"branch": "change-1", "ref": "main"})
    commit = project.commits.create(
        {
            "branch": "change-1",
            "commit_message": "Scale prod",
            "actions": [
                {"action": "update", "file_path": "config/prod.yaml", "content": "replicas: 3\n"},
                {"action": "create", "file_path": "config/new.yaml", "content": "new: 1\n"},
            ],
        }
    )
    mr = project.mergerequests.create(
        {"source_branch": "change-1", "target_branch": "main", "title": "Scale", "labels": ["ops"]}
    )
    assert (mr.iid, mr.sha, mr.labels, mr.state) == (1, commit.id, ["ops"], "opened")
    assert double.file(PROJECT, "config/prod.yaml", "change-1") == "replicas: 3\n"
    assert double.file(PROJECT, "config/prod.yaml") == "replicas: 2\n"
    assert project.files.raw(file_path="config/new.yaml", ref="change-1") == b"new: 1\n"
    log = project.commits.list(ref_name="change-1", get_all=True)
    assert [c.id for c in log][:1] == [commit.id]
    assert project.commits.get(commit.id).parent_ids == [double.branch_head(PROJECT, "main")]


@pytest.mark.parametrize(
    ("action", "path"),
    [("create", "README.md"), ("update", "missing.yaml"), ("delete", "missing.yaml")],
)
def test_impossible_commit_action_is_400(
    double: GitLabDouble, project: GlProject, action: str, path: str
) -> None:
    """Creating an existing file, or changing a missing one, is a 400 that moves nothing."""
    head = double.branch_head(PROJECT, "main")
    actions = [{"action": action, "file_path": path, "content": "x"}]
    with pytest.raises(gitlab.GitlabCreateError) as error:
        project.commits.create({"branch": "main", "commit_message": "m", "actions": actions})
    assert error.value.response_code == 400
    assert double.branch_head(PROJECT, "main") == head


def test_unknown_token_is_401_and_missing_branch_404(
    double: GitLabDouble, mock: responses.RequestsMock
) -> None:
    """An unknown token gets 401, and a missing branch 404, by encoded path or numeric id."""
    with pytest.raises(gitlab.GitlabAuthenticationError):
        client("nope").auth()
    project = client().projects.get(1)
    assert project.path_with_namespace == PROJECT
    with pytest.raises(gitlab.GitlabGetError) as error:
        project.branches.get("nope")
    assert error.value.response_code == 404
    assert double.count(status=401) == 1


def test_mr_read_fields(double: GitLabDouble, project: GlProject) -> None:
    """A read MR carries state, statuses, head sha, author, URLs, head pipeline and rebase flag."""
    iid = open_change(double)
    double.approve_as(PROJECT, iid, "alice")  # EE GitLab checks approvals first
    mr = project.mergerequests.get(iid, include_rebase_in_progress=True)
    assert mr.state == "opened"
    assert mr.detailed_merge_status == "ci_still_running"
    assert mr.sha == double.branch_head(PROJECT, "change-1")
    assert mr.author["username"] == "bot"
    assert mr.web_url == f"{URL}/{PROJECT}/-/merge_requests/{iid}"
    assert mr.head_pipeline["status"] == "running"
    assert mr.head_pipeline["sha"] == mr.sha
    assert mr.source_project_id == mr.target_project_id == project.id
    assert (mr.merge_commit_sha, mr.merge_error, mr.rebase_in_progress) == (None, None, False)
    assert "rebase_in_progress" not in project.mergerequests.get(iid).attributes


def test_fork_mr_has_different_source_project(double: GitLabDouble, project: GlProject) -> None:
    """An MR from a fork names the fork as source project and the target as target project."""
    fork = double.add_project("alice/config", files=FILES, protect_default=False)
    iid = double.open_mr(PROJECT, "fix", author="bot", source_project=fork, files={"a": "1"}).iid
    mr = project.mergerequests.get(iid)
    assert (mr.source_project_id, mr.target_project_id) == (fork.id, project.id)


def test_pipelines_move_and_new_commits_start_new_ones(
    double: GitLabDouble, project: GlProject
) -> None:
    """set_pipeline moves a pipeline; a push starts a new one, or a passed one in auto-pass."""
    iid = open_change(double)
    mr = project.mergerequests.get(iid)
    first = mr.pipelines.list()[0]
    double.set_pipeline(PROJECT, first.id, "success")
    assert project.pipelines.get(first.id).status == "success"
    assert project.mergerequests.get(iid).detailed_merge_status == "not_approved"
    double.push(PROJECT, "change-1", {"config/prod.yaml": "replicas: 4\n"}, author="bot")
    assert [p.status for p in mr.pipelines.list()] == ["running", "success"]
    double.new_pipeline_status = "success"
    double.push(PROJECT, "change-1", {"config/prod.yaml": "replicas: 5\n"}, author="bot")
    assert [p.status for p in mr.pipelines.list()] == ["success", "running", "success"]


@pytest.mark.parametrize(("mode", "repeat_status"), [("old", 401), ("new", 304)])
def test_repeat_approve_by_mode(
    double: GitLabDouble, mock: responses.RequestsMock, mode: str, repeat_status: int
) -> None:
    """Approve answers 201, then a repeat by the same user 401 (old GitLab) or 304 (new)."""
    double.mode = mode
    iid = open_change(double)
    mr = client("alice-token").projects.get(PROJECT, lazy=True).mergerequests.get(iid)
    assert mr.approve(sha=mr.sha)["approved"] is True
    with pytest.raises(gitlab.GitlabError) as error:
        mr.approve()
    assert error.value.response_code == repeat_status
    assert [c.status for c in double.calls_matching("POST", path_endswith="/approve")] == [
        201,
        repeat_status,
    ]
    assert [a["user"]["username"] for a in mr.approvals.get().approved_by] == ["alice"]


def test_approve_refusals(double: GitLabDouble, mock: responses.RequestsMock) -> None:
    """A stale sha is 409; a reporter or a user configured as not allowed gets 401."""
    iid = open_change(double)
    double.deny_approval(PROJECT, "bot")
    for token, sha, status in [
        ("alice-token", "0" * 40, 409),
        ("rita-token", None, 401),
        ("bot-token", None, 401),
    ]:
        mr = client(token).projects.get(PROJECT, lazy=True).mergerequests.get(iid)
        with pytest.raises(gitlab.GitlabError) as error:
            mr.approve(sha=sha)
        assert error.value.response_code == status
    assert double.mr(PROJECT, iid).approvals == []


def test_unapprove_withdraws(double: GitLabDouble, mock: responses.RequestsMock) -> None:
    """Unapprove removes the user's approval, and a second unapprove is 404."""
    iid = open_change(double)
    double.approve_as(PROJECT, iid, "alice")
    mr = client("alice-token").projects.get(PROJECT, lazy=True).mergerequests.get(iid)
    mr.unapprove()
    assert mr.approvals.get().approved is False
    with pytest.raises(gitlab.GitlabMRApprovalError) as error:
        mr.unapprove()
    assert error.value.response_code == 404


def test_check_items_required(double: GitLabDouble, mock: responses.RequestsMock) -> None:
    """With check items on, approve without them is 422 listing them; with them it passes."""
    items = ["tests pass", "rollback plan"]
    double.require_check_items(PROJECT, items)
    iid = open_change(double)
    gl = client("alice-token")
    served = gl.http_get("/projects/platform%2Fconfig/approval_check_items")
    assert served == {"enabled": True, "check_items": items}
    path = f"/projects/1/merge_requests/{iid}/approve"
    with pytest.raises(gitlab.GitlabHttpError) as error:
        gl.http_post(path, post_data={"check_items": items[:1]})
    assert error.value.response_code == 422
    assert json.loads(error.value.response_body or b"{}")["check_items"] == items
    gl.http_post(path, post_data={"check_items": items})
    assert double.mr(PROJECT, iid).approvals == [double.user("alice").id]


def test_merge_405_while_ci_running_and_409_on_sha(
    double: GitLabDouble, project: GlProject
) -> None:
    """Merge is 405 while the pipeline runs, then 409 for a stale sha, and merges nothing."""
    iid = open_change(double)
    mr = project.mergerequests.get(iid)
    double.approve_as(PROJECT, iid, "alice")
    with pytest.raises(gitlab.GitlabMRClosedError) as error:
        mr.merge()
    assert error.value.response_code == 405
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    double.set_pipeline(PROJECT, pipeline.id, "success")
    with pytest.raises(gitlab.GitlabMRClosedError) as error:
        mr.merge(sha="f" * 40)
    assert error.value.response_code == 409
    assert double.mr(PROJECT, iid).state == "opened"


def test_merge_405_when_not_approved_or_checking(double: GitLabDouble, project: GlProject) -> None:
    """Merge is 405 when approvals are missing, and while GitLab is still checking."""
    iid = open_change(double)
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    double.set_pipeline(PROJECT, pipeline.id, "success")
    mr = project.mergerequests.get(iid)
    assert mr.detailed_merge_status == "not_approved"
    with pytest.raises(gitlab.GitlabMRClosedError):
        mr.merge()
    double.approve_as(PROJECT, iid, "alice")
    double.set_merge_status(PROJECT, iid, "checking")
    with pytest.raises(gitlab.GitlabMRClosedError) as error:
        mr.merge()
    assert error.value.response_code == 405
    assert double.count("PUT", path_endswith="/merge", status=405) == 2


def test_merge_moves_target_and_deletes_source(double: GitLabDouble, project: GlProject) -> None:
    """A merge returns the merged MR, moves main to the merge commit and drops the branch."""
    iid = open_change(double)
    make_mergeable(double, iid)
    mr = project.mergerequests.get(iid)
    mr.merge(sha=mr.sha, should_remove_source_branch=True)
    assert mr.state == "merged"
    assert mr.merge_commit_sha == double.branch_head(PROJECT, "main")
    assert double.branch_head(PROJECT, "change-1") is None
    assert double.file(PROJECT, "config/prod.yaml") == "replicas: 3\n"
    with pytest.raises(gitlab.GitlabMRClosedError) as error:
        mr.merge()
    assert error.value.response_code == 405


def test_need_rebase_then_rebase_then_merge(double: GitLabDouble, project: GlProject) -> None:
    """In a fast-forward project a moved target gives need_rebase (422); a rebase fixes it."""
    double.project(PROJECT).merge_method = "ff"
    iid = open_change(double)
    make_mergeable(double, iid)
    double.advance_branch(PROJECT, "main")
    mr = project.mergerequests.get(iid)
    assert mr.detailed_merge_status == "need_rebase"
    with pytest.raises(gitlab.GitlabMRClosedError) as error:
        mr.merge()
    assert error.value.response_code == 422
    assert mr.rebase() == {"rebase_in_progress": True}
    assert project.mergerequests.get(iid, include_rebase_in_progress=True).rebase_in_progress
    old_sha = mr.sha
    double.complete_rebase(PROJECT, iid)
    mr = project.mergerequests.get(iid, include_rebase_in_progress=True)
    assert (mr.rebase_in_progress, mr.detailed_merge_status) == (False, "ci_still_running")
    assert mr.sha != old_sha
    assert double.is_ancestor(str(double.branch_head(PROJECT, "main")), mr.sha)
    double.set_pipeline(PROJECT, mr.head_pipeline["id"], "success")
    mr.merge(sha=mr.sha)
    assert (mr.state, mr.merge_commit_sha) == ("merged", None)
    assert double.branch_head(PROJECT, "main") == mr.sha


def test_rebase_completes_after_n_reads(double: GitLabDouble, project: GlProject) -> None:
    """With rebase_auto_after=2, two reads see the rebase in progress and the third sees it done."""
    double.rebase_auto_after = 2
    iid = open_change(double)
    double.advance_branch(PROJECT, "main")
    project.mergerequests.get(iid).rebase()
    seen = [
        project.mergerequests.get(iid, include_rebase_in_progress=True).rebase_in_progress
        for _ in range(3)
    ]
    assert seen == [True, True, False]


def test_rebase_failure_sets_merge_error(double: GitLabDouble, project: GlProject) -> None:
    """A rebase over a conflicting target fails: merge_error, status conflict, same head."""
    double.project(PROJECT).merge_method = "ff"
    iid = open_change(double)
    double.approve_as(PROJECT, iid, "alice")  # EE GitLab checks approvals first
    head = double.mr(PROJECT, iid).sha
    double.advance_branch(PROJECT, "main", {"config/prod.yaml": "replicas: 9\n"})
    project.mergerequests.get(iid).rebase()
    double.complete_rebase(PROJECT, iid)
    mr = project.mergerequests.get(iid)
    assert mr.merge_error is not None
    assert mr.merge_error.startswith("Rebase failed")
    assert (mr.detailed_merge_status, mr.has_conflicts, mr.sha) == ("conflict", True, head)


@pytest.mark.parametrize(("mode", "status"), [("old", 406), ("new", 422)])
def test_conflict_status_by_mode(
    double: GitLabDouble, project: GlProject, mode: str, status: int
) -> None:
    """A conflicting MR is refused with 406 on old GitLab and 422 on new GitLab."""
    double.mode = mode
    iid = open_change(double)
    make_mergeable(double, iid)
    double.advance_branch(PROJECT, "main", {"config/prod.yaml": "replicas: 9\n"})
    mr = project.mergerequests.get(iid)
    assert mr.detailed_merge_status == "conflict"
    with pytest.raises(gitlab.GitlabMRClosedError) as error:
        mr.merge()
    assert error.value.response_code == status
    assert error.value.error_message == "Branch cannot be merged"


def test_mr_update_labels_and_state(double: GitLabDouble, project: GlProject) -> None:
    """PUT adds and removes labels and closes then reopens the MR."""
    iid = open_change(double)
    mr = project.mergerequests.get(iid)
    mr.labels = ["a", "b"]
    mr.save()
    client().http_put(f"/projects/1/merge_requests/{iid}", post_data={"add_labels": "c"})
    client().http_put(f"/projects/1/merge_requests/{iid}", post_data={"remove_labels": "a"})
    assert project.mergerequests.get(iid).labels == ["b", "c"]
    mr.state_event = "close"
    mr.save()
    assert double.mr(PROJECT, iid).state == "closed"
    assert project.mergerequests.list(state="opened", source_branch="change-1") == []
    mr.state_event = "reopen"
    mr.save()
    assert [m.iid for m in project.mergerequests.list(state="opened")] == [iid]


def test_notes_create_and_edit(double: GitLabDouble, mock: responses.RequestsMock) -> None:
    """A note is created, edited by its author, and refused (403) to anyone else."""
    iid = open_change(double)
    mr = client().projects.get(PROJECT, lazy=True).mergerequests.get(iid, lazy=True)
    note = mr.notes.create({"body": "status: pending"})
    note.body = "status: done"
    note.save()
    assert [n.body for n in mr.notes.list()] == ["status: done"]
    foreign = client("alice-token").projects.get(PROJECT, lazy=True).mergerequests.get(iid)
    stolen = foreign.notes.get(note.id)
    stolen.body = "hijacked"
    with pytest.raises(gitlab.GitlabUpdateError) as error:
        stolen.save()
    assert error.value.response_code == 403
    assert double.mr(PROJECT, iid).notes[note.id].body == "status: done"


def test_award_emoji_repeat_is_404(double: GitLabDouble, mock: responses.RequestsMock) -> None:
    """A repeat award by the same user is GitLab's 404; another user (even a stranger) may award."""
    iid = open_change(double)
    note = double.add_note(PROJECT, iid, "alice", "/approve")
    for token in ("bot-token", "outsider-token"):
        mr = client(token).projects.get(PROJECT, lazy=True).mergerequests.get(iid, lazy=True)
        mr.notes.get(note.id).awardemojis.create({"name": "eyes"})
    again = client().projects.get(PROJECT, lazy=True).mergerequests.get(iid, lazy=True)
    with pytest.raises(gitlab.GitlabCreateError) as error:
        again.notes.get(note.id).awardemojis.create({"name": "eyes"})
    assert error.value.response_code == 404
    assert "Award Emoji Name has already been taken" in str(error.value.error_message)
    assert len(again.notes.get(note.id).awardemojis.list()) == 2


def test_member_lookup(double: GitLabDouble, project: GlProject) -> None:
    """Members answer with their access level; a non-member is 404."""
    assert project.members_all.get(double.user("alice").id).access_level == Access.MAINTAINER
    with pytest.raises(gitlab.GitlabGetError) as error:
        project.members_all.get(double.user("outsider").id)
    assert error.value.response_code == 404


def test_hooks_crud_and_disabled_flag(double: GitLabDouble, mock: responses.RequestsMock) -> None:
    """Hooks are created, edited, listed, shown disabled by the control method, and deleted."""
    project = client("alice-token").projects.get(PROJECT)
    hook = project.hooks.create(
        {"url": "https://bot/hook", "token": "s3", "merge_requests_events": True}
    )
    assert (hook.merge_requests_events, hook.note_events, hook.alert_status) == (
        True,
        False,
        "executable",
    )
    assert "token" not in hook.attributes
    hook.note_events = True
    hook.save()
    assert project.hooks.get(hook.id).note_events is True
    until = datetime(2030, 1, 1, tzinfo=UTC)
    double.disable_hook(PROJECT, hook.id, until=until)
    shown = project.hooks.list()[0]
    assert (shown.alert_status, shown.disabled_until) == (
        "temporarily_disabled",
        "2030-01-01T00:00:00.000Z",
    )
    double.disable_hook(PROJECT, hook.id)
    assert project.hooks.get(hook.id).alert_status == "disabled"
    project.hooks.delete(hook.id)
    assert project.hooks.list() == []
    with pytest.raises(gitlab.GitlabListError) as error:
        client().projects.get(PROJECT).hooks.list()
    assert error.value.response_code == 403


def test_fault_500_twice_then_ok(double: GitLabDouble, project: GlProject) -> None:
    """Two injected 500s on matching reads, then the real answer; other calls are untouched."""
    iid = open_change(double)
    double.fail_next(2, 500, methods="GET", path_contains=f"/merge_requests/{iid}")
    assert project.branches.get("main").name == "main"
    for _ in range(2):
        with pytest.raises(gitlab.GitlabGetError) as error:
            project.mergerequests.get(iid)
        assert error.value.response_code == 500
    assert project.mergerequests.get(iid).iid == iid
    assert [c.fault for c in double.calls_matching("GET", f"/merge_requests/{iid}")] == [
        "500",
        "500",
        None,
    ]


def test_fault_429_with_and_without_retry_after(
    double: GitLabDouble, mock: responses.RequestsMock
) -> None:
    """A 429 carries Retry-After when asked, none otherwise, and the next call passes."""
    double.fail_next(1, 429, retry_after=7)
    double.fail_next(1, 429)
    headers = {"PRIVATE-TOKEN": "bot-token"}
    first = requests.get(f"{API}/user", headers=headers, timeout=5)
    second = requests.get(f"{API}/user", headers=headers, timeout=5)
    third = requests.get(f"{API}/user", headers=headers, timeout=5)
    assert (first.status_code, first.headers.get("Retry-After")) == (429, "7")
    assert (second.status_code, second.headers.get("Retry-After")) == (429, None)
    assert third.json()["username"] == "bot"


def test_timeout_still_applies_the_mutation(double: GitLabDouble, project: GlProject) -> None:
    """A timed-out merge raises ReadTimeout yet merged; with apply=False nothing happened."""
    iid = open_change(double)
    make_mergeable(double, iid)
    mr = project.mergerequests.get(iid)
    double.fail_next(1, "timeout", methods="PUT", path_contains="/merge")
    with pytest.raises(requests.exceptions.ReadTimeout):
        mr.merge(sha=mr.sha)
    assert project.mergerequests.get(iid).state == "merged"
    double.fail_next(1, "timeout", methods="POST", path_contains="/notes", apply=False)
    with pytest.raises(requests.exceptions.ReadTimeout):
        mr.notes.create({"body": "lost"})
    assert double.mr(PROJECT, iid).notes == {}


def test_call_recording(double: GitLabDouble, project: GlProject) -> None:
    """Calls are recorded with method, decoded path, query, body, status and user."""
    iid = open_change(double)
    double.clear_calls()
    project.mergerequests.get(iid, include_rebase_in_progress=True)
    project.mergerequests.get(iid).notes.create({"body": "hello"})
    assert double.count("GET", f"/merge_requests/{iid}") == 2
    assert double.count("POST", path_endswith="/notes", status=201) == 1
    assert double.count("PUT") == 0
    note_call = double.calls_matching("POST")[0]
    assert (note_call.body, note_call.user) == ({"body": "hello"}, "bot")
    assert double.calls[0].query == {"include_rebase_in_progress": "True"}


def test_pagination_headers_and_links(double: GitLabDouble, project: GlProject) -> None:
    """Lists page at 20 with X-Total and Link; get_all follows the links to every item."""
    iid = open_change(double)
    for n in range(25):
        double.add_note(PROJECT, iid, "alice", f"note {n}")
    mr = project.mergerequests.get(iid, lazy=True)
    assert len(mr.notes.list(get_all=True)) == 25
    assert len(mr.notes.list(page=2, per_page=10)) == 10
    response = requests.get(
        f"{API}/projects/1/merge_requests/{iid}/notes",
        headers={"PRIVATE-TOKEN": "bot-token"},
        timeout=5,
    )
    assert (response.headers["X-Total"], response.headers["X-Next-Page"]) == ("25", "2")
    assert 'rel="next"' in response.headers["Link"]


def _fixture_keys(name: str) -> set[str]:
    return set(json.loads((FIXTURES / name).read_text()))


@pytest.mark.parametrize(
    ("kind", "event", "fixture"),
    [
        ("merge_request", "Merge Request Hook", "merge_request.json"),
        ("note", "Note Hook", "note_merge_request.json"),
        ("pipeline", "Pipeline Hook", "pipeline.json"),
    ],
)
def test_webhook_builders_keep_documented_shape(
    double: GitLabDouble, kind: str, event: str, fixture: str
) -> None:
    """MR, note and pipeline hooks keep the documented keys and carry our ids, iids and project."""
    open_change(double, "change-0")
    iid = open_change(double)
    assert iid == 2  # not the documented examples' iid, so a kept example value would show
    double.add_hook(PROJECT, "https://bot/hook", token="s3cret")
    headers, body = double.webhook(kind, project=PROJECT, iid=iid, idempotency_key="k-1")
    payload: dict[str, Any] = json.loads(body)
    documented = _fixture_keys(fixture) - {"source_pipeline"}
    assert set(payload) == documented
    expected = json.loads((FIXTURES / fixture).read_text())["object_attributes"]
    assert set(expected) <= set(payload["object_attributes"])
    assert payload["object_kind"] == json.loads((FIXTURES / fixture).read_text())["object_kind"]
    assert payload["project"]["id"] == double.project(PROJECT).id
    assert payload["project"]["path_with_namespace"] == PROJECT
    mr_hash = payload["object_attributes"] if kind == "merge_request" else payload["merge_request"]
    assert (mr_hash["iid"], mr_hash["id"]) == (iid, double.mr(PROJECT, iid).id)
    assert headers["X-Gitlab-Event"] == event
    assert (headers["X-Gitlab-Token"], headers["Idempotency-Key"]) == ("s3cret", "k-1")
    assert {"X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"} <= set(headers)


def test_webhook_overrides_note_pipeline_and_deployment(double: GitLabDouble) -> None:
    """Overrides set note text, author and system flag, pipeline status, and deployment values."""
    iid = open_change(double)
    _, body = double.webhook(
        "Note Hook", project=PROJECT, iid=iid, user="alice", note="/approve", system=True
    )
    note = json.loads(body)
    assert (note["object_attributes"]["note"], note["user"]["username"]) == ("/approve", "alice")
    assert note["object_attributes"]["system"] is True
    _, body = double.webhook("pipeline", project=PROJECT, iid=iid, status="failed")
    pipeline = json.loads(body)
    assert pipeline["object_attributes"]["status"] == "failed"
    assert pipeline["object_attributes"]["sha"] == double.mr(PROJECT, iid).sha
    deployment = double.deploy(PROJECT, environment="production")
    headers, body = double.webhook("deployment", project=PROJECT, deployment_id=deployment.id)
    payload = json.loads(body)
    # DataBuilder::Deployment also sends `ref`, which the documented example lacks
    assert set(payload) == _fixture_keys("deployment.json") | {"ref"}
    assert payload["ref"] == "main"
    assert (payload["deployment_id"], payload["status"]) == (deployment.id, "success")
    assert payload["short_sha"] == str(double.branch_head(PROJECT, "main"))[:8]
    assert "X-Gitlab-Token" not in headers


def test_outgoing_queue_follows_state_and_hook_status(double: GitLabDouble) -> None:
    """State changes queue the hooks GitLab would send; a disabled hook gets none."""
    hook = double.add_hook(PROJECT, "https://bot/hook", token="s3cret")
    iid = open_change(double)
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    double.set_pipeline(PROJECT, pipeline.id, "success")
    note = double.add_note(PROJECT, iid, "alice", "looks good")
    double.edit_note(PROJECT, iid, note.id, "looks great")
    kinds = [(d.kind, d.payload["object_attributes"].get("action")) for d in double.outgoing]
    assert kinds == [
        ("merge_request", "open"),
        ("pipeline", None),
        ("pipeline", None),
        ("note", "create"),
        ("note", "update"),
    ]
    assert double.outgoing[2].payload["object_attributes"]["status"] == "success"
    first = double.outgoing[0]
    resent = first.resend_headers()
    assert resent["Idempotency-Key"] == first.headers["Idempotency-Key"]
    assert resent["X-Gitlab-Webhook-UUID"] != first.headers["X-Gitlab-Webhook-UUID"]
    double.outgoing.clear()
    double.disable_hook(PROJECT, hook.id, until=datetime.now(UTC) + timedelta(hours=1))
    double.add_note(PROJECT, iid, "alice", "unheard")
    assert double.outgoing == []


def test_deliver_posts_with_gitlab_headers(
    double: GitLabDouble, mock: responses.RequestsMock
) -> None:
    """deliver() and deliver_outgoing() POST the payload with GitLab's headers to the bot."""
    mock.add(responses.POST, "https://bot.example.com/webhooks/gitlab", status=202)
    double.add_hook(PROJECT, "https://bot.example.com/webhooks/gitlab", token="s3cret")
    iid = open_change(double)
    sent = double.deliver_outgoing()
    assert [(d.kind, r.status_code) for d, r in sent] == [
        ("merge_request", 202),
        ("pipeline", 202),
    ]
    assert double.outgoing == []
    response = double.deliver(
        "https://bot.example.com/webhooks/gitlab", "note", project=PROJECT, iid=iid, note="hi"
    )
    request = mock.calls[-1].request
    assert response.status_code == 202
    assert request.headers["X-Gitlab-Event"] == "Note Hook"
    assert request.headers["X-Gitlab-Token"] == "s3cret"
    assert json.loads(request.body or b"")["object_attributes"]["note"] == "hi"


def test_real_server_with_requests(double: GitLabDouble) -> None:
    """Over real HTTP: Bearer auth, encoded project path, raw file, a note, 401 and a timeout."""
    iid = open_change(double)
    double.approve_as(PROJECT, iid, "alice")  # EE GitLab checks approvals first
    double.hang_seconds = 5.0
    with double.serve() as base, requests.Session() as http:
        api = f"{base}/api/v4/projects/platform%2Fconfig"
        auth = {"Authorization": "Bearer bot-token"}
        assert http.get(f"{base}/api/v4/user", headers=auth, timeout=5).json()["username"] == "bot"
        mr = http.get(f"{api}/merge_requests/{iid}", headers=auth, timeout=5).json()
        assert (mr["iid"], mr["detailed_merge_status"]) == (iid, "ci_still_running")
        raw = http.get(
            f"{api}/repository/files/config%2Fprod.yaml/raw",
            params={"ref": "change-1"},
            headers=auth,
            timeout=5,
        )
        assert raw.text == "replicas: 3\n"
        created = http.post(
            f"{api}/merge_requests/{iid}/notes", json={"body": "hi"}, headers=auth, timeout=5
        )
        assert created.status_code == 201
        assert http.get(f"{api}", headers={"PRIVATE-TOKEN": "bad"}, timeout=5).status_code == 401
        double.fail_next(1, "timeout", methods="POST", path_contains="/notes")
        with pytest.raises(requests.exceptions.ReadTimeout):
            http.post(
                f"{api}/merge_requests/{iid}/notes", json={"body": "x"}, headers=auth, timeout=0.2
            )
    assert [n.body for n in double.mr(PROJECT, iid).notes.values()] == ["hi", "x"]
