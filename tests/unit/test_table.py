"""The transition table: both orders, every failure exit, terminal states, the README diagram."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core import checks
from bot.core.diagram import mermaid, path_diagram
from bot.core.events import Event as E
from bot.core.guards import GUARDS, Snapshot
from bot.core.resolve import resolve
from bot.core.states import (
    AWAITING_APPROVAL,
    FAILED,
    REAPPLIABLE,
    REAPPLY_AFTER,
    TERMINAL,
    BindingState,
    Flow,
    Phase,
    Step,
)
from bot.core.states import BindingState as S
from bot.core.table import TABLE, Effect, Transition

README = Path(__file__).resolve().parents[2] / "README.md"


def walk(flow: Flow, events: list[E], snapshot: Snapshot | None = None) -> list[BindingState]:
    """Applies events from "no binding yet"; the states visited (fails on an illegal event)."""
    snap = snapshot or Snapshot(flow=flow)
    state: BindingState | None = None
    visited = []
    for event in events:
        row = resolve(state, event, snap).transition
        assert row is not None, f"{event} illegal in {state} for {flow}"
        state = row.target
        snap = replace(
            snap,
            step=row.step,
            has_mr=snap.has_mr or event is E.MR_OPENED,
            approved=snap.approved or event is E.APPROVED,
        )
        visited.append(state)
    return visited


APPROVE_FIRST = [
    E.SUBMIT,
    E.APPROVAL_SUBMITTED,
    E.APPROVED,
    E.MR_OPENED,
    E.PIPELINE_PASSED,
    E.HANDLE_START,
    E.APPROVALS_GIVEN,
    E.MERGED,
    E.DEPLOYED,
]
MR_FIRST = [
    E.SUBMIT,
    E.MR_OPENED,
    E.PIPELINE_PASSED,
    E.REQUEST_APPROVAL,
    E.APPROVAL_SUBMITTED,
    E.APPROVED,
    E.APPROVALS_GIVEN,
    E.MERGED,
    E.DEPLOYED,
]


def test_approve_first_reaches_validated() -> None:
    """Approval, then the bot's MR, checks, approve and merge, then the deployment's word."""
    assert walk(Flow.APPROVE_FIRST, APPROVE_FIRST) == [
        S.APPROVAL_SENDING,
        S.APPROVAL_SENT,
        S.MR_CREATING,
        S.MR_CREATING,
        S.MR_CREATED,
        S.MERGING,
        S.MERGING,
        S.MERGED,
        S.VALIDATED,
    ]


def test_mr_first_reaches_validated() -> None:
    """The MR and its checks first, then approval (ext.mrId), then approve and merge."""
    assert walk(Flow.MR_FIRST, MR_FIRST) == [
        S.MR_CREATING,
        S.MR_CREATING,
        S.MR_CREATED,
        S.APPROVAL_SENDING,
        S.APPROVAL_SENT,
        S.MERGING,
        S.MERGING,
        S.MERGED,
        S.VALIDATED,
    ]


def test_the_flows_do_not_cross() -> None:
    """An approve-first request cannot take the MR-first exits and the other way round."""
    snap = Snapshot(flow=Flow.APPROVE_FIRST, has_mr=True)
    assert resolve(S.MR_CREATED, E.REQUEST_APPROVAL, snap).transition is None
    mr_first = Snapshot(flow=Flow.MR_FIRST, has_mr=True)
    assert resolve(S.MR_CREATED, E.HANDLE_START, mr_first).transition is None
    assert resolve(S.APPROVAL_SENT, E.APPROVED, snap).transition.target is S.MR_CREATING
    assert resolve(S.APPROVAL_SENT, E.APPROVED, mr_first).transition.target is S.MERGING


@pytest.mark.parametrize(
    ("flow", "prefix", "event", "state", "step"),
    [
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:1],
            E.APPROVAL_SUBMIT_FAILED,
            S.CREATE_FAILED,
            Step.APPROVAL_SUBMIT_FAILED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:1],
            E.OVERLOADED,
            S.CREATE_FAILED,
            Step.CREATE_OVERLOADED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:3],
            E.CREATE_ERROR,
            S.CREATE_FAILED,
            Step.CREATE_FAILED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:4],
            E.PIPELINE_FAILED,
            S.CREATE_FAILED,
            Step.CREATE_PIPELINE_FAILED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:4],
            E.PIPELINE_TIMED_OUT,
            S.MR_CREATING,
            Step.CREATE_PIPELINE_PENDING,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:6],
            E.APPROVE_ERROR,
            S.HANDLE_FAILED,
            Step.HANDLE_APPROVE_FAILED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:7],
            E.REBASE_CONFLICT,
            S.HANDLE_FAILED,
            Step.HANDLE_REBASE_CONFLICT,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:7],
            E.MERGE_ERROR,
            S.HANDLE_FAILED,
            Step.HANDLE_MERGE_FAILED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:7],
            E.PIPELINE_FAILED,
            S.HANDLE_FAILED,
            Step.HANDLE_PIPELINE_FAILED,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:7],
            E.PIPELINE_TIMED_OUT,
            S.MERGING,
            Step.HANDLE_PIPELINE_PENDING,
        ),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:6],
            E.DEADLINE_EXPIRED,
            S.HANDLE_FAILED,
            Step.HANDLE_TIMED_OUT,
        ),
        (Flow.APPROVE_FIRST, APPROVE_FIRST[:2], E.REJECTED, S.REJECTED, Step.CLOSE_REJECTED),
        (Flow.APPROVE_FIRST, APPROVE_FIRST[:2], E.WITHDRAWN, S.REJECTED, Step.CLOSE_WITHDRAWN),
        (Flow.APPROVE_FIRST, APPROVE_FIRST[:4], E.MR_CLOSED, S.CLOSED, Step.CLOSE_MR_CLOSED),
        (Flow.APPROVE_FIRST, APPROVE_FIRST[:6], E.CANCEL, S.CLOSED, Step.CLOSE_CANCELLED),
        (
            Flow.APPROVE_FIRST,
            APPROVE_FIRST[:8],
            E.DEPLOY_FAILED,
            S.MERGED,
            Step.CALLBACK_DEPLOY_FAILED,
        ),
        (Flow.MR_FIRST, MR_FIRST[:1], E.OVERLOADED, S.CREATE_FAILED, Step.CREATE_OVERLOADED),
        (
            Flow.MR_FIRST,
            MR_FIRST[:2],
            E.PIPELINE_FAILED,
            S.CREATE_FAILED,
            Step.CREATE_PIPELINE_FAILED,
        ),
        (Flow.MR_FIRST, MR_FIRST[:5], E.REJECTED, S.REJECTED, Step.CLOSE_REJECTED),
    ],
)
def test_every_failure_exit_lands_in_its_state(
    flow: Flow, prefix: list[E], event: E, state: BindingState, step: Step
) -> None:
    """Each failure the workflow can meet has a row, with a specific step code."""
    current = walk(flow, prefix)[-1]
    row = resolve(current, event, Snapshot(flow=flow, has_mr=E.MR_OPENED in prefix)).transition
    assert row is not None
    assert (row.target, row.step) == (state, step)


def test_every_state_is_reachable_and_failures_too() -> None:
    """Every binding state, including both failure states, is reachable from a new request."""
    assert checks.reachable() == set(BindingState)
    assert checks.reachable() >= FAILED


def test_nothing_leaves_a_terminal_state_except_reapply_or_revert() -> None:
    """VALIDATED, REJECTED and CLOSED are left only by a new request (re-apply) or a revert."""
    leaving = {(r.source, r.event) for r in TABLE if r.source in TERMINAL}
    assert {event for _, event in leaving} <= {E.SUBMIT, E.REVERT}
    assert {(s, E.SUBMIT) for s in REAPPLIABLE} <= leaving
    assert (S.VALIDATED, E.REVERT) in leaving
    assert not any(r.source in {S.REJECTED, S.CLOSED} and r.event is E.REVERT for r in TABLE)


def test_failed_states_need_an_explicit_action() -> None:
    """A failed request is not re-appliable by a new submission unless the content stopped it
    (changed after approval, a refused path); otherwise retry or cancel move it."""
    assert not FAILED & REAPPLIABLE
    for state in FAILED:
        events = {r.event for r in TABLE if r.source == state}
        assert events == {E.RETRY, E.CANCEL, E.SUBMIT}
        guards = {r.guard for r in TABLE if r.source == state and r.event is E.SUBMIT}
        assert guards == {"reapply_approve_first", "reapply_mr_first"}
        for flow in Flow:
            ordinary = Snapshot(flow=flow, prior_step=Step.HANDLE_MERGE_FAILED)
            assert resolve(state, E.SUBMIT, ordinary).transition is None


@pytest.mark.parametrize("stop", sorted(REAPPLY_AFTER))
@pytest.mark.parametrize("state", sorted(FAILED))
def test_content_stops_take_a_reapply(state: S, stop: Step) -> None:
    """After "changed after approval" or a refused path, a re-apply starts a new request in the
    flow asked for."""
    for flow, target in ((Flow.APPROVE_FIRST, S.APPROVAL_SENDING), (Flow.MR_FIRST, S.MR_CREATING)):
        moved = resolve(state, E.SUBMIT, Snapshot(flow=flow, prior_step=stop)).transition
        assert moved is not None
        assert moved.target is target


def test_changed_after_approval_refuses_a_retry() -> None:
    """A retry after "changed after approval" would approve what nobody approved: refused."""
    for flow in Flow:
        stopped = Snapshot(flow=flow, step=Step.HANDLE_CHANGED_AFTER_APPROVAL)
        assert resolve(S.HANDLE_FAILED, E.RETRY, stopped).transition is None
        other = Snapshot(flow=flow, step=Step.HANDLE_MERGE_FAILED)
        assert resolve(S.HANDLE_FAILED, E.RETRY, other).transition is not None


def test_retry_returns_to_the_step_where_it_stopped() -> None:
    """A create failure before approval retries the approval; after approval, the creation."""
    before = Snapshot(flow=Flow.APPROVE_FIRST, step=Step.APPROVAL_SUBMIT_FAILED)
    after = Snapshot(flow=Flow.APPROVE_FIRST, step=Step.CREATE_FAILED, approved=True)
    mr_first = Snapshot(flow=Flow.MR_FIRST, step=Step.CREATE_PIPELINE_FAILED)
    assert resolve(S.CREATE_FAILED, E.RETRY, before).transition.target is S.APPROVAL_SENDING
    assert resolve(S.CREATE_FAILED, E.RETRY, after).transition.target is S.MR_CREATING
    assert resolve(S.CREATE_FAILED, E.RETRY, mr_first).transition.target is S.MR_CREATING
    assert resolve(S.HANDLE_FAILED, E.RETRY, after).transition.target is S.MERGING


def test_approval_callback_counts_while_sending() -> None:
    """An approval callback that beats our SENT write is accepted in SENDING."""
    for state in AWAITING_APPROVAL:
        row = resolve(state, E.APPROVED, Snapshot(flow=Flow.APPROVE_FIRST)).transition
        assert row is not None
        assert row.step is Step.CALLED_BACK


def test_a_guard_that_raises_is_a_no(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken guard refuses the row and says why, instead of raising."""

    def broken(_: Snapshot) -> bool:
        raise RuntimeError("boom")

    monkeypatch.setitem(GUARDS, "approve_first", broken)
    result = resolve(None, E.SUBMIT, Snapshot(flow=Flow.APPROVE_FIRST))
    assert result.transition is None
    assert any("approve_first: raised RuntimeError: boom" in r for r in result.refused)


def test_effects_follow_the_operation() -> None:
    """Status and label effects need an MR; closing needs the bot's MR; withdraw a live approval."""
    reject = next(r for r in TABLE if r.source is S.APPROVAL_SENT and r.event is E.REJECTED)
    no_mr = Snapshot(flow=Flow.MR_FIRST)
    persons_mr = Snapshot(flow=Flow.MR_FIRST, has_mr=True)
    bots_mr = Snapshot(flow=Flow.MR_FIRST, has_mr=True, mr_opened_by_bot=True)
    assert reject.effects_for(no_mr) == []
    assert reject.effects_for(persons_mr) == [Effect.STATUS_COMMENT, Effect.LABELS]
    assert Effect.CLOSE_MR in reject.effects_for(bots_mr)
    cancel = next(r for r in TABLE if r.source is S.APPROVAL_SENT and r.event is E.CANCEL)
    live = Snapshot(flow=Flow.APPROVE_FIRST, has_approval_request=True)
    assert cancel.effects_for(live) == [Effect.WITHDRAW_APPROVAL]


def test_the_table_checks_clean() -> None:
    """`gitops-bot transitions check` finds nothing wrong with the shipped table."""
    assert checks.problems() == []


def test_the_check_finds_faults() -> None:
    """A table with a dead end, an exit from a terminal state and an unknown guard is refused."""
    broken = [r for r in TABLE if not (r.source is S.MERGED and r.event is E.DEPLOYED)]
    broken.append(Transition(S.CLOSED, E.RETRY, S.MERGING, Step.HANDLE_STARTED))
    broken.append(Transition(S.MERGING, E.MERGED, S.MERGED, Step.HANDLE_MERGED, "nope"))
    found = "\n".join(checks.problems(broken))
    assert "VALIDATED: not reachable" in found
    assert "leaves a terminal state" in found
    assert "unknown guard 'nope'" in found


def test_step_codes_are_grouped_by_phase() -> None:
    """Step codes start at the documented numbers and their prefix names the phase."""
    assert Step.CREATE_STARTED == 10001
    assert Step.CREATE_PIPELINE_FAILED == 10004
    assert Step.HANDLE_STARTED == 10101
    assert Step.HANDLE_REBASE_CONFLICT == 10105
    assert Step.CALLED_BACK == 10301
    assert Step.HANDLE_PIPELINE_PENDING == 10501
    assert Step.HANDLE_PIPELINE_PENDING.phase is Phase.WAITING
    assert {s.phase for s in Step} == set(Phase)


def test_readme_diagram_equals_the_table() -> None:
    """The Mermaid diagram in the README is exactly the one rendered from the table."""
    text = README.read_text()
    found = re.search(r"```mermaid\n(.*?)```", text, re.DOTALL)
    assert found is not None, "README has no mermaid block"
    assert found.group(1) == mermaid()


def test_path_diagram_highlights_the_current_state() -> None:
    """One request's path is drawn in order, with its current state highlighted."""
    text = path_diagram(
        [
            (None, S.APPROVAL_SENDING, "submit"),
            (S.APPROVAL_SENDING, S.APPROVAL_SENT, "approval_submitted"),
        ]
    )
    assert "[*] --> APPROVAL_SENDING : submit" in text
    assert text.rstrip().endswith("class APPROVAL_SENT current")


@settings(max_examples=300, deadline=None)
@given(
    flow=st.sampled_from(list(Flow)),
    events=st.lists(st.sampled_from(list(E)), max_size=40),
    has_mr=st.booleans(),
)
def test_random_event_sequences_only_take_table_rows(
    flow: Flow, events: list[E], has_mr: bool
) -> None:
    """Any sequence of events moves only along table rows and never out of a terminal state
    except by re-apply or revert."""
    state: BindingState | None = None
    snap = Snapshot(flow=flow, has_mr=has_mr)
    for event in events:
        row = resolve(state, event, snap).transition
        if row is None:
            continue
        assert row in TABLE
        if state in TERMINAL:
            assert event in {E.SUBMIT, E.REVERT}
        state = row.target
        snap = replace(snap, step=row.step)
