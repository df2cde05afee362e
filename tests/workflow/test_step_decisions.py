"""The steps' pure decisions (bot/app/steps/decide.py), table by table: the facts read from
GitLab in, the transition (or wait) out. No database, no GitLab double: a wrong row here is a
wrong transition in production."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.app.steps import decide, decisions
from bot.app.steps.decide import (
    MAX_RESTARTS,
    REBASE_ASKED,
    decide_approve,
    decide_finished,
    decide_handle,
    decide_merge,
    decide_pipeline,
    decide_rebase,
    decide_restart,
    decide_unfollowed_rebase,
    needs_recheck,
)
from bot.app.steps.decisions import (
    Advance,
    Approve,
    Later,
    Merge,
    Poll,
    Restart,
    StepDecision,
    StopChanged,
    Verdict,
)
from bot.core.events import Event as E
from bot.core.states import BindingState, Flow, Step
from bot.gitlab.approve import ApproveOutcome, ApproveResult
from bot.gitlab.merge import MergeOutcome, MergeResult, RebaseState, RebaseStatus
from bot.gitlab.views import MrView
from bot.store.operations import OperationRow

SHA = "a" * 40
NEW_SHA = "b" * 40

MR = MrView(
    iid=7,
    project_id=1,
    state="opened",
    detailed_merge_status="mergeable",
    sha=SHA,
    merge_commit_sha=None,
    squash_commit_sha=None,
    merge_error=None,
    rebase_in_progress=False,
    has_conflicts=False,
    draft=False,
    labels=(),
    author="alice",
    source_project_id=1,
    target_project_id=1,
    source_branch="gitops/x",
    target_branch="main",
    web_url="https://gitlab.example/p/-/merge_requests/7",
    head_pipeline_id=42,
    head_pipeline_status="success",
    head_pipeline_sha=SHA,
)

OP = OperationRow(
    id="op-1",
    state=BindingState.MERGING,
    owner=True,
    flow=Flow.APPROVE_FIRST,
    step=Step.HANDLE_STARTED,
    version=3,
    kind="change",
    project="group/project",
    project_id=1,
    target_branch="main",
    title="t",
    description="d",
    files=[],
    requested_by="alice",
    mr_iid=7,
    mr_url=None,
    mr_opened_by_bot=True,
    branch="gitops/x",
    head_sha=SHA,
    merge_commit_sha=None,
    approval_id=None,
    change_identity=None,
    verified_sha=SHA,
    approved=True,
    attempts=0,
    deadline_at=None,
    progress={},
)

APPROVED_OP = replace(
    OP,
    step=Step.HANDLE_APPROVED,
    progress={"sha": SHA, "approved": ["bot1", "bot2"], "tries": {"bot1": 1}, "restarts": 2},
)


def mr(**changes: Any) -> MrView:
    """The open MR at SHA with a passed pipeline, but for `changes` (its pipeline on its head,
    unless `head_pipeline_sha` says otherwise)."""
    if "sha" in changes and "head_pipeline_sha" not in changes:
        changes["head_pipeline_sha"] = changes["sha"]
    return replace(MR, **changes)


# -- creation: the MR's head pipeline -------------------------------------------------------

PIPELINE_FAILED = "MR pipeline 42 {}"


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"head_pipeline_status": "success"}, Advance(E.PIPELINE_PASSED, {"head_sha": SHA})),
        *[
            (
                {"head_pipeline_status": status},
                Advance(
                    E.PIPELINE_FAILED,
                    {"head_sha": SHA, "error_detail": PIPELINE_FAILED.format(status)},
                ),
            )
            for status in ("failed", "canceled", "skipped")
        ],
        *[
            ({"head_pipeline_status": status}, Poll("pipeline"))
            for status in ("running", "pending", "created", "manual", None)
        ],
        # a closed MR ends the change, whatever its pipeline says
        ({"state": "closed"}, Advance(E.MR_CLOSED)),
        ({"state": "closed", "head_pipeline_status": "failed"}, Advance(E.MR_CLOSED)),
    ],
)
def test_pipeline_poll(facts: dict[str, Any], expected: StepDecision) -> None:
    """The MR as read while creating: its pipeline's status decides the transition."""
    assert decide_pipeline(mr(**facts)) == expected


# -- handling: merged, closed or open ---------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"state": "merged"}, Advance(E.MERGED, {"merge_commit_sha": SHA})),  # fast-forward
        (
            {"state": "merged", "merge_commit_sha": "m" * 40, "squash_commit_sha": "s" * 40},
            Advance(E.MERGED, {"merge_commit_sha": "m" * 40}),
        ),
        (
            {"state": "merged", "squash_commit_sha": "s" * 40},
            Advance(E.MERGED, {"merge_commit_sha": "s" * 40}),
        ),
        ({"state": "closed"}, Advance(E.MR_CLOSED)),
        ({"state": "opened"}, None),
        ({"state": "locked"}, None),
    ],
)
def test_a_merged_or_closed_mr_ends_handling(
    facts: dict[str, Any], expected: StepDecision | None
) -> None:
    """Merged (someone merged it: recorded with its commit) or closed; open goes on."""
    assert decide_finished(mr(**facts)) == expected


def test_a_changed_mr_stops_before_anything_is_approved_or_merged() -> None:
    """A failed integrity check stops the change, approved on that head or not."""
    verdict = Verdict(SHA, ("new commits were pushed",))
    assert decide_handle(OP, MR, verdict) == StopChanged(verdict)
    assert decide_handle(APPROVED_OP, MR, verdict) == StopChanged(verdict)


def test_approved_on_the_checked_head_merges_pinned_to_it() -> None:
    """HANDLE_APPROVED on the head just checked: merge that head, the progress kept."""
    decision = decide_handle(APPROVED_OP, MR, Verdict(SHA))
    assert decision == Merge(SHA, MR, APPROVED_OP.progress)


def test_a_new_head_starts_its_approvals_afresh_keeping_the_restart_count() -> None:
    """Approved on another head (after a rebase): approve the new one from nobody."""
    moved = mr(sha=NEW_SHA)
    decision = decide_handle(APPROVED_OP, moved, Verdict(NEW_SHA))
    assert decision == Approve(
        NEW_SHA, {"sha": NEW_SHA, "approved": [], "tries": {}, "restarts": 2}
    )


def test_approving_goes_on_where_it_stopped_on_the_same_head() -> None:
    """Not yet approved on this head: the accounts that approved it are not asked again."""
    halfway = replace(
        OP, progress={"sha": SHA, "approved": ["bot1"], "tries": {"bot1": 1, "bot2": 2}}
    )
    decision = decide_handle(halfway, MR, Verdict(SHA))
    assert decision == Approve(SHA, halfway.progress)


def test_a_first_handling_approves_the_checked_head() -> None:
    """No progress yet: approve the checked head, nobody approved, no restart so far."""
    decision = decide_handle(OP, MR, Verdict(SHA))
    assert decision == Approve(SHA, {"sha": SHA, "approved": [], "tries": {}, "restarts": 0})


# -- handling: the merge's outcome -------------------------------------------------------------

MERGE_TABLE: dict[MergeOutcome, tuple[MergeResult, StepDecision]] = {
    MergeOutcome.MERGED: (
        MergeResult(MergeOutcome.MERGED, merge_commit_sha="m" * 40, detail="merged"),
        Advance(E.MERGED, {"merge_commit_sha": "m" * 40}),
    ),
    MergeOutcome.WAIT: (MergeResult(MergeOutcome.WAIT, retry_in=10.0), Poll("merge")),
    MergeOutcome.REBASE_STARTED: (
        MergeResult(MergeOutcome.REBASE_STARTED),
        Advance(E.REBASE_STARTED, {"progress": {**APPROVED_OP.progress, "rebase_from": SHA}}),
    ),
    MergeOutcome.REBASE_CONFLICT: (
        MergeResult(MergeOutcome.REBASE_CONFLICT, detail="conflict in a.yaml"),
        Advance(E.REBASE_CONFLICT, {"error_detail": "conflict in a.yaml"}),
    ),
    MergeOutcome.NOT_APPROVED: (
        MergeResult(MergeOutcome.NOT_APPROVED),
        Restart("merge said not_approved", {"restarts": 3}, by_event=True),
    ),
    MergeOutcome.HEAD_MOVED: (
        MergeResult(MergeOutcome.HEAD_MOVED, status_code=409),
        Restart("merge said head_moved", {"restarts": 3}, by_event=True),
    ),
    MergeOutcome.BLOCKED: (
        MergeResult(MergeOutcome.BLOCKED, detail="draft_status"),
        Advance(E.MERGE_ERROR, {"error_detail": "GitLab refuses to merge: draft_status"}),
    ),
}


def test_the_merge_table_covers_every_outcome() -> None:
    """A new MergeOutcome needs its row (and its decision) before it can ship."""
    assert set(MERGE_TABLE) == set(MergeOutcome)


@pytest.mark.parametrize("outcome", list(MergeOutcome))
def test_every_merge_outcome_to_its_transition(outcome: MergeOutcome) -> None:
    """Each merge outcome, approved on SHA with two restarts behind it, to its decision."""
    result, expected = MERGE_TABLE[outcome]
    progress = dict(APPROVED_OP.progress)
    assert decide_merge(APPROVED_OP, result, SHA, progress) == expected
    assert progress == APPROVED_OP.progress  # the decision does not write the facts


@pytest.mark.parametrize("outcome", [MergeOutcome.NOT_APPROVED, MergeOutcome.HEAD_MOVED])
def test_merge_gives_up_restarting_after_max_restarts(outcome: MergeOutcome) -> None:
    """The approvals reset or the head moved MAX_RESTARTS times: the change fails."""
    progress = {**APPROVED_OP.progress, "restarts": MAX_RESTARTS}
    decision = decide_merge(APPROVED_OP, MergeResult(outcome), SHA, progress)
    assert decision == Advance(
        E.MERGE_ERROR, {"error_detail": f"merge said {outcome.value}, {MAX_RESTARTS} times"}
    )


# -- restarts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("restarts", range(MAX_RESTARTS))
@pytest.mark.parametrize(
    ("step", "by_event"), [(Step.HANDLE_APPROVED, True), (Step.HANDLE_STARTED, False)]
)
def test_restarts_are_counted(restarts: int, step: Step, by_event: bool) -> None:
    """Under the bound, approving starts again (RETRY once approved, else the step later)
    with only the restart count, one up, kept."""
    op = replace(OP, step=step)
    progress = {"sha": SHA, "approved": ["bot1"], "restarts": restarts}
    assert decide_restart(op, progress, "why") == Restart(
        "why", {"restarts": restarts + 1}, by_event=by_event
    )


@pytest.mark.parametrize("restarts", [MAX_RESTARTS, MAX_RESTARTS + 3])
def test_restarts_beyond_the_bound_are_a_merge_error(restarts: int) -> None:
    """One restart more than MAX_RESTARTS fails the change: MERGE_ERROR naming why."""
    for step in (Step.HANDLE_APPROVED, Step.HANDLE_STARTED):
        decision = decide_restart(replace(OP, step=step), {"restarts": restarts}, "the head moved")
        assert decision == Advance(
            E.MERGE_ERROR, {"error_detail": f"the head moved, {MAX_RESTARTS} times"}
        )


# -- approving: one account's attempt ----------------------------------------------------------

APPROVE_PROGRESS = {"sha": SHA, "approved": [], "tries": {"bot1": 1}, "restarts": 1}
APPROVE_TABLE: dict[ApproveOutcome, tuple[ApproveResult, StepDecision | None]] = {
    ApproveOutcome.APPROVED: (ApproveResult(ApproveOutcome.APPROVED), None),
    ApproveOutcome.ALREADY: (ApproveResult(ApproveOutcome.ALREADY), None),
    ApproveOutcome.RETRY: (
        ApproveResult(ApproveOutcome.RETRY, retry_in=4.0),
        Later(4.0, APPROVE_PROGRESS),
    ),
    ApproveOutcome.HEAD_MOVED: (
        ApproveResult(ApproveOutcome.HEAD_MOVED, status_code=409),
        Restart("the head moved while approving", {"restarts": 2}, by_event=False),
    ),
    ApproveOutcome.FAILED: (
        ApproveResult(ApproveOutcome.FAILED, status_code=401, reason="401 Unauthorized"),
        Advance(E.APPROVE_ERROR, {"error_detail": "bot1: 401 Unauthorized"}),
    ),
}


def test_the_approve_table_covers_every_outcome() -> None:
    """A new ApproveOutcome needs its row before it can ship."""
    assert set(APPROVE_TABLE) == set(ApproveOutcome)


@pytest.mark.parametrize("outcome", list(ApproveOutcome))
def test_every_approve_outcome_to_its_decision(outcome: ApproveOutcome) -> None:
    """Approved: go on to the next account (None); else retry pinned, restart or fail."""
    result, expected = APPROVE_TABLE[outcome]
    assert decide_approve(OP, "bot1", result, APPROVE_PROGRESS) == expected


def test_a_retry_without_a_delay_waits_a_second() -> None:
    """GitLab gave no Retry-After: the account tries again in a second."""
    decision = decide_approve(OP, "bot1", ApproveResult(ApproveOutcome.RETRY), APPROVE_PROGRESS)
    assert decision == Later(1.0, APPROVE_PROGRESS)


def test_an_approve_failure_detail_is_bounded() -> None:
    """The account and GitLab's reason, cut to 500 characters for error_detail."""
    result = ApproveResult(ApproveOutcome.FAILED, reason="x" * 1000)
    decision = decide_approve(OP, "bot1", result, APPROVE_PROGRESS)
    assert isinstance(decision, Advance)
    assert decision.event is E.APPROVE_ERROR
    assert decision.changes["error_detail"] == "bot1: " + "x" * 494


# -- handling: the rebase ----------------------------------------------------------------------

DONE = RebaseStatus(RebaseState.DONE, NEW_SHA)
REBASED = mr(sha=NEW_SHA)
PASSED_AFTER = Advance(E.PIPELINE_PASSED, {"head_sha": NEW_SHA, "progress": {}})


def _failed_after(status: str) -> Advance:
    return Advance(
        E.PIPELINE_FAILED,
        {"head_sha": NEW_SHA, "error_detail": f"MR pipeline 42 {status} after the rebase"},
    )


@pytest.mark.parametrize(
    ("status", "facts", "verdict", "expected"),
    [
        (
            RebaseStatus(RebaseState.FAILED, SHA, "Rebase failed: conflict"),
            None,
            None,
            Advance(E.REBASE_CONFLICT, {"error_detail": "Rebase failed: conflict"}),
        ),
        (
            RebaseStatus(RebaseState.FAILED, SHA),
            None,
            None,
            Advance(E.REBASE_CONFLICT, {"error_detail": "conflict"}),
        ),
        (RebaseStatus(RebaseState.IN_PROGRESS, SHA), None, None, Poll("rebase")),
        (DONE, {"head_pipeline_status": "success"}, None, PASSED_AFTER),
        (DONE, {"head_pipeline_status": "success"}, Verdict(NEW_SHA), PASSED_AFTER),
        *[
            (DONE, {"head_pipeline_status": s}, Verdict(NEW_SHA), _failed_after(s))
            for s in ("failed", "canceled", "skipped")
        ],
        *[
            (DONE, {"head_pipeline_status": s}, Verdict(NEW_SHA), Poll("pipeline"))
            for s in ("running", "pending", None)
        ],
    ],
)
def test_rebase_and_the_pipeline_after_it(
    status: RebaseStatus,
    facts: dict[str, Any] | None,
    verdict: Verdict | None,
    expected: StepDecision,
) -> None:
    """A failed rebase is a conflict; a finished one waits for the new head's pipeline."""
    rebased = None if facts is None else mr(sha=NEW_SHA, **facts)
    assert decide_rebase(status, rebased, verdict) == expected


@pytest.mark.parametrize("pipeline", ["success", "failed", "running"])
def test_a_rebased_head_that_is_not_the_approved_change_stops(pipeline: str) -> None:
    """The rebase brought in a change: stopped, even with a passed pipeline."""
    verdict = Verdict(NEW_SHA, ("a.yaml differs",))
    rebased = mr(sha=NEW_SHA, head_pipeline_status=pipeline)
    assert decide_rebase(DONE, rebased, verdict) == StopChanged(verdict)


def test_a_finished_rebase_needs_the_mr_read_after_it() -> None:
    """Deciding a finished rebase without the MR is a programming error, not a poll."""
    with pytest.raises(ValueError, match="finished rebase"):
        decide_rebase(DONE)


@pytest.mark.parametrize(
    ("verified", "head", "expected"), [(SHA, SHA, False), (SHA, NEW_SHA, True), (None, SHA, True)]
)
def test_only_an_unverified_head_is_checked_again(
    verified: str | None, head: str, expected: bool
) -> None:
    """The head verified before needs no second integrity check after the rebase."""
    assert needs_recheck(replace(OP, verified_sha=verified), mr(sha=head)) is expected


def test_a_rebase_asked_for_but_not_recorded_is_followed_as_the_bots_own() -> None:
    """The handling step noted the rebase it was asking for (from the verified head) and then its
    worker died: handling follows that rebase (REBASE_STARTED from that head) instead of taking
    the rebased head for a push; the note goes."""
    asked = replace(APPROVED_OP, progress={**APPROVED_OP.progress, REBASE_ASKED: SHA})
    assert decide_unfollowed_rebase(asked) == Advance(
        E.REBASE_STARTED, {"progress": {**APPROVED_OP.progress, "rebase_from": SHA}}
    )


@pytest.mark.parametrize(
    "progress",
    [{}, {REBASE_ASKED: NEW_SHA}, {"rebase_from": SHA}],
    ids=["none", "other", "started"],
)
def test_no_unfollowed_rebase_without_a_note_for_the_verified_head(
    progress: dict[str, Any],
) -> None:
    """No note, a note for a head other than the verified one, or a rebase already recorded:
    handling goes on as ever."""
    assert decide_unfollowed_rebase(replace(APPROVED_OP, progress=progress)) is None


# -- the functional core stays pure ------------------------------------------------------------

ALLOWED = {
    "__future__",
    "dataclasses",
    "typing",
    "bot.app.steps.decisions",
    "bot.core.events",
    "bot.core.pipelines",  # pure: the one judgement of a pipeline for a head
    "bot.core.states",
    "bot.gitlab.approve",
    "bot.gitlab.merge",
    "bot.gitlab.trains",
    "bot.gitlab.views",
    "bot.store.operations",
}


@pytest.mark.parametrize("module", [decide, decisions])
def test_the_decisions_import_only_data_types(module: Any) -> None:
    """decide.py and decisions.py import no service, store function, clock or shell module
    (the GitLab and store modules only for their result and row types)."""
    tree = ast.parse(Path(module.__file__).read_text())
    imported: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.setdefault(node.module, set()).update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imported.setdefault(alias.name, set())
    assert set(imported) <= ALLOWED
    data_types = {
        "bot.gitlab.approve": {"ApproveOutcome", "ApproveResult"},
        "bot.gitlab.merge": {
            "MergeOutcome",
            "MergeResult",
            "RebaseState",
            "RebaseStatus",
            "WAIT_SECONDS",
        },
        "bot.gitlab.trains": {
            "FOLLOW_SECONDS",
            "TrainOutcome",
            "TrainProgress",
            "TrainResult",
            "TrainState",
        },
        "bot.gitlab.views": {"MrView"},
        "bot.store.operations": {"OperationRow"},
    }
    for name, types in data_types.items():
        assert imported.get(name, set()) <= types, name
