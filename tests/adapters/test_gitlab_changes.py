"""create_change, close_mr and delete_branch against a mocked GitLab: re-runs never duplicate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
from responses import matchers

from bot.gitlab import (
    BranchNotOurs,
    ChangeRef,
    UnknownOutcome,
    close_mr,
    create_change,
    delete_branch,
)
from tests.adapters.test_gitlab_harness import PID, SHA, P, account, calls, mock_gitlab, mr_json

OP = "op-1"
BRANCH_URL = f"{P}/repository/branches/gitops%2Fop-1"
MRS_URL = f"{P}/merge_requests"
COMMITS_URL = f"{P}/repository/commits"
TRAILER_MSG = f"Change app config\n\nChange-Request: {OP}\n"
FILES: list[dict[str, str]] = [
    {"path": "apps/web/values.yaml", "content": "replicas: 3\n"},
    {"path": "apps/api/values.yaml", "content": "replicas: 2\n"},
]


#: The target branch's head commit when the change started: the bot's branch starts there.
BASE = "b" * 40


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


def _create(**kw: Any) -> ChangeRef:
    args: dict[str, Any] = {
        "operation_id": OP,
        "target_branch": "main",
        "start_sha": BASE,
        "files": FILES,
        "title": "Change app config",
        "description": "Requested via the portal",
        "labels": ["gitops", "gitops::checking"],
    }
    args.update(kw)
    return create_change(account().project(42), **args)


def _branch(message: str = TRAILER_MSG, sha: str = SHA) -> dict[str, Any]:
    return {"name": f"gitops/{OP}", "commit": {"id": sha, "message": message}}


def _no_mr(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.GET,
        MRS_URL,
        json=[],
        match=[matchers.query_param_matcher({"source_branch": "gitops/op-1"}, strict_match=False)],
    )


def _files_lookup(rsps: responses.RequestsMock) -> None:
    at_base = [matchers.query_param_matcher({"ref": BASE})]  # the commit the branch starts from
    rsps.add(
        responses.HEAD, f"{P}/repository/files/apps%2Fweb%2Fvalues.yaml", status=404, match=at_base
    )
    rsps.add(
        responses.HEAD, f"{P}/repository/files/apps%2Fapi%2Fvalues.yaml", status=200, match=at_base
    )


def _commit_ok(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.POST,
        COMMITS_URL,
        json={"id": SHA, "message": TRAILER_MSG},
        status=201,
        match=[
            matchers.json_params_matcher(
                {
                    "branch": "gitops/op-1",
                    "start_sha": BASE,
                    "commit_message": TRAILER_MSG,
                    "actions": [
                        {
                            "action": "create",
                            "file_path": "apps/web/values.yaml",
                            "content": "replicas: 3\n",
                        },
                        {
                            "action": "update",
                            "file_path": "apps/api/values.yaml",
                            "content": "replicas: 2\n",
                        },
                    ],
                }
            )
        ],
    )


def _mr_ok(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.POST,
        MRS_URL,
        json=mr_json(source_branch="gitops/op-1"),
        status=201,
        match=[
            matchers.json_params_matcher(
                {
                    "source_branch": "gitops/op-1",
                    "target_branch": "main",
                    "title": "Change app config",
                    "description": "Requested via the portal",
                    "labels": "gitops,gitops::checking",
                    "remove_source_branch": True,
                }
            )
        ],
    )


def test_fresh_change_makes_branch_commit_and_mr(rsps: responses.RequestsMock) -> None:
    """A first run reads, then makes the branch and its one commit in one call, then the MR."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, status=404, json={"message": "404 Branch Not Found"})
    _files_lookup(rsps)
    _commit_ok(rsps)
    _mr_ok(rsps)

    ref = _create()

    assert ref == ChangeRef(
        "gitops/op-1",
        SHA,
        7,
        mr_json()["web_url"],
        created=True,
        project_id=PID,
        head_sha=SHA,
        wrote_commit=True,
    )
    assert len(rsps.calls) == 6


def test_a_fresh_operation_skips_the_branch_and_mr_lookups(rsps: responses.RequestsMock) -> None:
    """`fresh`: nothing of this operation can exist yet, so neither its branch nor an MR is
    looked for (four calls, not six), and the commit is known to be the one just written."""
    _files_lookup(rsps)
    _commit_ok(rsps)
    _mr_ok(rsps)

    ref = _create(fresh=True)

    assert ref.wrote_commit is True
    assert ref.mr_iid == 7
    assert not any(c.request.method == "GET" for c in rsps.calls)
    assert len(rsps.calls) == 4


def test_a_fresh_operation_finding_its_branch_looks_for_the_mr(
    rsps: responses.RequestsMock,
) -> None:
    """`fresh` but the branch is there (written by someone else under our name): the commit's
    write is refused, the branch is read then, the MR is looked for, and the commit found by
    its trailer is not taken as written by this run."""
    _files_lookup(rsps)
    rsps.add(
        responses.POST,
        COMMITS_URL,
        status=400,
        json={"message": "A branch called 'gitops/op-1' already exists."},
    )
    rsps.add(responses.GET, BRANCH_URL, json=_branch())
    _no_mr(rsps)
    _mr_ok(rsps)

    ref = _create(fresh=True)

    assert (ref.commit_sha, ref.wrote_commit, ref.mr_iid) == (SHA, False, 7)
    assert calls(rsps).count("POST /projects/42/repository/commits") == 1


def test_rerun_after_crash_after_commit_opens_only_the_mr(rsps: responses.RequestsMock) -> None:
    """A re-run after a crash between the commit and the MR reuses the commit: no second one."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, json=_branch())
    _mr_ok(rsps)

    ref = _create()

    assert ref.commit_sha == SHA
    assert ref.created is True
    assert "POST /projects/42/repository/commits" not in calls(rsps)
    assert len(rsps.calls) == 3


def test_rerun_after_crash_after_mr_makes_nothing(rsps: responses.RequestsMock) -> None:
    """A re-run after the MR was opened reuses branch, commit and MR: reads only."""
    rsps.add(responses.GET, MRS_URL, json=[mr_json()])
    rsps.add(responses.GET, BRANCH_URL, json=_branch())

    ref = _create()

    assert ref == ChangeRef(
        "gitops/op-1", SHA, 7, mr_json()["web_url"], created=False, project_id=PID, head_sha=SHA
    )
    assert calls(rsps) == [
        "GET /projects/42/merge_requests",
        "GET /projects/42/repository/branches/gitops%2Fop-1",
    ]


def test_rerun_finds_our_commit_below_a_pushed_one(rsps: responses.RequestsMock) -> None:
    """A commit pushed on top of ours (so the head has no trailer) still counts as our branch."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, json=_branch("fixup by a person\n", "c" * 40))
    rsps.add(
        responses.GET,
        COMMITS_URL,
        json=[{"id": "c" * 40, "message": "fixup\n"}, {"id": SHA, "message": TRAILER_MSG}],
        match=[matchers.query_param_matcher({"ref_name": "gitops/op-1"}, strict_match=False)],
    )
    _mr_ok(rsps)

    ref = _create()

    assert ref.commit_sha == SHA
    assert "POST /projects/42/repository/commits" not in calls(rsps)


def test_branch_without_our_trailer_is_never_overwritten(rsps: responses.RequestsMock) -> None:
    """A branch of that name without our trailer is an explicit error, and nothing is written."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, json=_branch("someone else's work\n", "d" * 40))
    rsps.add(responses.GET, COMMITS_URL, json=[{"id": "d" * 40, "message": "someone else's\n"}])

    with pytest.raises(BranchNotOurs) as caught:
        _create()

    assert "op-1" in str(caught.value)
    assert all(not c.startswith(("POST", "PUT")) for c in calls(rsps))


def test_commit_timeout_then_reread_finds_it(rsps: responses.RequestsMock) -> None:
    """A commit whose answer timed out is found again by its trailer and not made twice."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, status=404)
    _files_lookup(rsps)
    rsps.add(responses.POST, COMMITS_URL, body=requests.exceptions.ReadTimeout("read timed out"))
    rsps.add(responses.GET, BRANCH_URL, json=_branch())
    _mr_ok(rsps)

    ref = _create()

    assert ref.commit_sha == SHA
    assert ref.wrote_commit is False  # found by its trailer, not from our write's answer
    assert calls(rsps).count("POST /projects/42/repository/commits") == 1


def test_commit_timeout_with_nothing_landed_is_unknown_outcome(
    rsps: responses.RequestsMock,
) -> None:
    """A commit that timed out and is not on GitLab raises UnknownOutcome for a later re-run."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, status=404)
    _files_lookup(rsps)
    rsps.add(responses.POST, COMMITS_URL, body=requests.exceptions.ReadTimeout("read timed out"))
    rsps.add(responses.GET, BRANCH_URL, status=404)

    with pytest.raises(UnknownOutcome):
        _create()


def test_concurrent_mr_creation_reuses_the_other_mr(rsps: responses.RequestsMock) -> None:
    """A 409 "another open MR exists" on opening the MR finds and reuses that MR."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, json=_branch())
    rsps.add(
        responses.POST,
        MRS_URL,
        status=409,
        json={"message": ["Another open merge request already exists for this source branch"]},
    )
    rsps.add(responses.GET, MRS_URL, json=[mr_json(iid=8)])

    ref = _create()

    assert ref.mr_iid == 8
    assert calls(rsps).count("POST /projects/42/merge_requests") == 1


def test_already_merged_change_is_reused(rsps: responses.RequestsMock) -> None:
    """A change whose MR was merged (branch removed) is not made again."""
    rsps.add(responses.GET, MRS_URL, json=[mr_json(state="merged", merge_commit_sha="e" * 40)])

    ref = _create()

    assert (ref.mr_iid, ref.commit_sha, ref.created) == (7, "e" * 40, False)
    assert len(rsps.calls) == 1


def test_mr_from_a_fork_branch_of_the_same_name_is_ignored(rsps: responses.RequestsMock) -> None:
    """An MR from a fork's `gitops/<id>` branch is not taken for ours."""
    rsps.add(responses.GET, MRS_URL, json=[mr_json(iid=99, source_project_id=77)])
    rsps.add(responses.GET, BRANCH_URL, json=_branch())
    _mr_ok(rsps)

    assert _create().mr_iid == 7


def test_delete_action_only_for_files_that_exist(rsps: responses.RequestsMock) -> None:
    """A delete of a present file is committed; a delete of a missing file is left out."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, status=404)
    rsps.add(responses.HEAD, f"{P}/repository/files/old.yaml", status=200)
    rsps.add(responses.HEAD, f"{P}/repository/files/gone.yaml", status=404)
    rsps.add(
        responses.POST,
        COMMITS_URL,
        status=201,
        json={"id": SHA},
        match=[
            matchers.json_params_matcher(
                {"actions": [{"action": "delete", "file_path": "old.yaml"}]}, strict_match=False
            )
        ],
    )
    _mr_ok(rsps)

    _create(
        files=[{"path": "old.yaml", "action": "delete"}, {"path": "gone.yaml", "action": "delete"}]
    )


def test_close_open_mr_reads_then_closes(rsps: responses.RequestsMock) -> None:
    """Closing an open MR reads it, then closes it with one PUT."""
    rsps.add(responses.GET, f"{MRS_URL}/7", json=mr_json())
    rsps.add(
        responses.PUT,
        f"{MRS_URL}/7",
        json=mr_json(state="closed"),
        match=[matchers.json_params_matcher({"state_event": "close"})],
    )

    assert close_mr(account().project(42), 7) is True
    assert len(rsps.calls) == 2


@pytest.mark.parametrize("state", ["closed", "merged"])
def test_close_skips_closed_or_merged_mr(rsps: responses.RequestsMock, state: str) -> None:
    """Closing an MR that is already closed or merged reads it and writes nothing."""
    rsps.add(responses.GET, f"{MRS_URL}/7", json=mr_json(state=state))

    assert close_mr(account().project(42), 7) is False
    assert len(rsps.calls) == 1


def test_delete_branch_gone_is_fine(rsps: responses.RequestsMock) -> None:
    """Deleting twice: the first call deletes, the second finds it gone (404): fine."""
    rsps.add(responses.DELETE, BRANCH_URL, status=204)
    rsps.add(responses.DELETE, BRANCH_URL, status=404, json={"message": "404 Branch Not Found"})
    project = account().project(42)

    assert delete_branch(project, "gitops/op-1") is True
    assert delete_branch(project, "gitops/op-1") is False


def test_delete_branch_refuses_other_branches(rsps: responses.RequestsMock) -> None:
    """The bot never deletes a branch it did not name (no call is made)."""
    with pytest.raises(ValueError, match="not a gitops/ branch"):
        delete_branch(account().project(42), "main")
    assert len(rsps.calls) == 0


def test_paths_known_at_the_base_commit_cost_no_lookup(rsps: responses.RequestsMock) -> None:
    """The caller read both files at the base commit (the preview): no HEAD per file, the same
    create and update actions (a commit never changes, so what was read there still holds)."""
    _no_mr(rsps)
    rsps.add(responses.GET, BRANCH_URL, status=404, json={"message": "404 Branch Not Found"})
    _commit_ok(rsps)
    _mr_ok(rsps)
    known = {"apps/web/values.yaml": False, "apps/api/values.yaml": True}
    ref = _create(known=known)
    assert ref.commit_sha == SHA
    assert not [c for c in rsps.calls if c.request.method == "HEAD"]
