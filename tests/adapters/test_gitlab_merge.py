"""merge and rebase_status against a mocked GitLab: every refusal lands in a defined outcome."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
from responses import matchers

from bot.gitlab import (
    GitLabUnavailable,
    MergeOutcome,
    MergeResult,
    MrClosed,
    RebaseState,
    merge,
    rebase_status,
)
from tests.adapters.test_gitlab_harness import NEW_SHA, SHA, P, account, calls, mock_gitlab, mr_json

MR = f"{P}/merge_requests/7"
MERGE = f"{MR}/merge"
REBASE = f"{MR}/rebase"
MERGE_SHA = "f" * 40


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


def _mr(rsps: responses.RequestsMock, **kw: Any) -> None:
    rsps.add(
        responses.GET,
        MR,
        json=mr_json(**kw),
        match=[matchers.query_param_matcher({"include_rebase_in_progress": "true"})],
    )


def _merge(rsps: responses.RequestsMock, status: int, body: Any = None, **kw: Any) -> None:
    rsps.add(responses.PUT, MERGE, status=status, json=body or {"message": str(status)}, **kw)


def _run() -> MergeResult:
    return merge(account().project(42), 7, SHA)


def test_merge_pinned_to_sha(rsps: responses.RequestsMock) -> None:
    """A mergeable MR is read, then merged pinned to the sha, removing the source branch."""
    _mr(rsps)
    _merge(
        rsps,
        200,
        mr_json(state="merged", merge_commit_sha=MERGE_SHA),
        match=[matchers.json_params_matcher({"sha": SHA, "should_remove_source_branch": True})],
    )

    result = _run()

    assert (result.outcome, result.merge_commit_sha) == (MergeOutcome.MERGED, MERGE_SHA)
    assert len(rsps.calls) == 2


def test_accepted_merge_is_confirmed_by_reading(rsps: responses.RequestsMock) -> None:
    """A 2xx whose body is not merged yet (async merge) is confirmed by reading the MR."""
    _mr(rsps)
    _merge(rsps, 200, mr_json(state="opened"))
    _mr(rsps, state="merged", merge_commit_sha=MERGE_SHA)

    assert _run().outcome is MergeOutcome.MERGED
    assert len(rsps.calls) == 3


def test_accepted_merge_not_merged_yet_waits(rsps: responses.RequestsMock) -> None:
    """A 2xx that the re-read does not show merged is WAIT, not MERGED."""
    _mr(rsps)
    _merge(rsps, 200, mr_json(state="opened"))
    _mr(rsps, state="locked")

    assert _run().outcome is MergeOutcome.WAIT


def test_already_merged_without_a_put(rsps: responses.RequestsMock) -> None:
    """An MR merged already (by us earlier, or a person) is MERGED and nothing is written."""
    _mr(rsps, state="merged", merge_commit_sha=MERGE_SHA)

    result = _run()

    assert (result.outcome, result.merge_commit_sha) == (MergeOutcome.MERGED, MERGE_SHA)
    assert calls(rsps) == ["GET /projects/42/merge_requests/7"]


def test_closed_mr_is_an_error(rsps: responses.RequestsMock) -> None:
    """A closed MR raises MrClosed (deterministic) and is never merged."""
    _mr(rsps, state="closed")

    with pytest.raises(MrClosed):
        _run()
    assert len(rsps.calls) == 1


def test_head_moved_before_merge_skips_the_put(rsps: responses.RequestsMock) -> None:
    """A head that is not our sha any more is HEAD_MOVED without trying the merge."""
    _mr(rsps, sha=NEW_SHA)

    assert _run().outcome is MergeOutcome.HEAD_MOVED
    assert len(rsps.calls) == 1


def test_405_while_ci_still_running_waits(rsps: responses.RequestsMock) -> None:
    """A 405 read back as ci_still_running is WAIT with a suggested delay."""
    _mr(rsps)
    _merge(rsps, 405, {"message": "405 Method Not Allowed"})
    _mr(
        rsps, detailed_merge_status="ci_still_running", head_pipeline={"id": 9, "status": "running"}
    )

    result = _run()

    assert (result.outcome, result.status_code) == (MergeOutcome.WAIT, 405)
    assert result.retry_in is not None
    assert result.retry_in > 0


@pytest.mark.parametrize(
    ("pipeline", "expected"),
    [("running", MergeOutcome.WAIT), ("failed", MergeOutcome.BLOCKED)],
)
def test_ci_must_pass_depends_on_the_pipeline(
    rsps: responses.RequestsMock, pipeline: str, expected: MergeOutcome
) -> None:
    """ci_must_pass waits while the pipeline runs and blocks once it failed."""
    _mr(rsps)
    _merge(rsps, 405)
    _mr(rsps, detailed_merge_status="ci_must_pass", head_pipeline={"id": 9, "status": pipeline})

    assert _run().outcome is expected


def test_406_conflict_on_old_gitlab(rsps: responses.RequestsMock) -> None:
    """Older GitLab (no detailed_merge_status) answers conflicts with 406: REBASE_CONFLICT."""
    _mr(rsps, detailed_merge_status=None)
    _merge(rsps, 406, {"message": "Branch cannot be merged"})
    _mr(rsps, detailed_merge_status=None)

    result = _run()

    assert (result.outcome, result.status_code) == (MergeOutcome.REBASE_CONFLICT, 406)


def test_422_conflict_on_new_gitlab(rsps: responses.RequestsMock) -> None:
    """Newer GitLab answers 422 and shows `conflict`: REBASE_CONFLICT, no rebase tried."""
    _mr(rsps)
    _merge(rsps, 422, {"message": "Branch cannot be merged"})
    _mr(rsps, detailed_merge_status="conflict", has_conflicts=True)

    assert _run().outcome is MergeOutcome.REBASE_CONFLICT
    assert "PUT /projects/42/merge_requests/7/rebase" not in calls(rsps)


def test_409_is_head_moved(rsps: responses.RequestsMock) -> None:
    """A 409 on the merge (sha mismatch) is HEAD_MOVED."""
    _mr(rsps)
    _merge(rsps, 409, {"message": "SHA does not match HEAD of source branch"})

    result = _run()

    assert (result.outcome, result.status_code) == (MergeOutcome.HEAD_MOVED, 409)


def test_422_need_rebase_starts_a_rebase(rsps: responses.RequestsMock) -> None:
    """A 422 read back as need_rebase asks for a rebase (202 = queued): REBASE_STARTED."""
    _mr(rsps)
    _merge(rsps, 422, {"message": "Branch cannot be merged"})
    _mr(rsps, detailed_merge_status="need_rebase")
    rsps.add(responses.PUT, REBASE, status=202, json={"rebase_in_progress": True})

    result = _run()

    assert result.outcome is MergeOutcome.REBASE_STARTED
    assert calls(rsps) == [
        "GET /projects/42/merge_requests/7",
        "PUT /projects/42/merge_requests/7/merge",
        "GET /projects/42/merge_requests/7",
        "PUT /projects/42/merge_requests/7/rebase",
    ]


def test_need_rebase_seen_first_rebases_without_merging(rsps: responses.RequestsMock) -> None:
    """An MR already showing need_rebase is rebased without a doomed merge call."""
    _mr(rsps, detailed_merge_status="need_rebase")
    rsps.add(responses.PUT, REBASE, status=202, json={"rebase_in_progress": True})

    assert _run().outcome is MergeOutcome.REBASE_STARTED
    assert len(rsps.calls) == 2


def test_rebase_running_is_not_merged_over(rsps: responses.RequestsMock) -> None:
    """While a rebase runs, merge asks the caller to keep polling it (no write)."""
    _mr(rsps, rebase_in_progress=True)

    assert _run().outcome is MergeOutcome.REBASE_STARTED
    assert len(rsps.calls) == 1


def test_not_approved_goes_back_to_approval(rsps: responses.RequestsMock) -> None:
    """A 405 read back as not_approved is NOT_APPROVED."""
    _mr(rsps)
    _merge(rsps, 405)
    _mr(rsps, detailed_merge_status="not_approved")

    assert _run().outcome is MergeOutcome.NOT_APPROVED


def test_draft_is_blocked(rsps: responses.RequestsMock) -> None:
    """A refusal the bot cannot fix (a draft MR) is BLOCKED with GitLab's word for it."""
    _mr(rsps)
    _merge(rsps, 405)
    _mr(rsps, detailed_merge_status="draft_status")

    result = _run()

    assert (result.outcome, result.detail) == (MergeOutcome.BLOCKED, "draft_status")


@pytest.mark.parametrize(
    ("state", "expected"), [("merged", MergeOutcome.MERGED), ("opened", MergeOutcome.WAIT)]
)
def test_timeout_on_merge_rereads(
    rsps: responses.RequestsMock, state: str, expected: MergeOutcome
) -> None:
    """A merge whose answer timed out is re-read: MERGED if it merged, else WAIT."""
    _mr(rsps)
    rsps.add(responses.PUT, MERGE, body=requests.exceptions.ReadTimeout("read timed out"))
    _mr(rsps, state=state, merge_commit_sha=MERGE_SHA if state == "merged" else None)

    assert _run().outcome is expected


def test_5xx_on_merge_rereads_then_raises(rsps: responses.RequestsMock) -> None:
    """A 502 on the merge is re-read; not merged, it raises a transient error for a retry."""
    _mr(rsps)
    _merge(rsps, 502)
    _mr(rsps)

    with pytest.raises(GitLabUnavailable) as caught:
        _run()
    assert caught.value.status_code == 502


def test_5xx_after_a_merge_that_happened_is_merged(rsps: responses.RequestsMock) -> None:
    """A 502 from a proxy after GitLab merged is read back as MERGED."""
    _mr(rsps)
    _merge(rsps, 502)
    _mr(rsps, state="merged", merge_commit_sha=MERGE_SHA)

    assert _run().outcome is MergeOutcome.MERGED


def test_rebase_status_in_progress_done_failed(rsps: responses.RequestsMock) -> None:
    """Polling the rebase: in progress, then done with a new head; or failed with merge_error."""
    _mr(rsps, rebase_in_progress=True)
    _mr(rsps, sha=NEW_SHA)
    _mr(rsps, merge_error="Rebase failed: Please rebase locally")
    project = account().project(42)

    assert rebase_status(project, 7, before_sha=SHA).state is RebaseState.IN_PROGRESS
    done = rebase_status(project, 7, before_sha=SHA)
    failed = rebase_status(project, 7, before_sha=SHA)

    assert (done.state, done.sha) == (RebaseState.DONE, NEW_SHA)
    assert failed.state is RebaseState.FAILED
    assert failed.merge_error == "Rebase failed: Please rebase locally"


def test_rebase_status_ignores_an_old_merge_error_once_the_head_moved(
    rsps: responses.RequestsMock,
) -> None:
    """A merge_error left from before is not a failure when the rebase produced a new head."""
    _mr(rsps, sha=NEW_SHA, merge_error="old failure")

    assert rebase_status(account().project(42), 7, before_sha=SHA).state is RebaseState.DONE
