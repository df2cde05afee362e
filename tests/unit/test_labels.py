"""The phase labels: one per binding state, and one call that leaves exactly one on the MR."""

from __future__ import annotations

import pytest

from bot.core.labels import ALL_LABELS, LABELS, PHASE_TITLES, SCOPE, label_change, label_for
from bot.core.states import BindingState


def test_every_state_has_exactly_one_label() -> None:
    """Each of the eleven binding states maps to one scoped gitops:: label from the set."""
    assert set(LABELS) == set(BindingState)
    for state in BindingState:
        assert label_for(state) in ALL_LABELS
        assert label_for(state).startswith(SCOPE)


def test_the_eight_phase_labels_of_the_design() -> None:
    """ALL_LABELS is exactly the README's list of phase labels, each named in words for the
    status comment."""
    assert ALL_LABELS == (
        "gitops::awaiting-approval",
        "gitops::checking",
        "gitops::merging",
        "gitops::merged",
        "gitops::in-effect",
        "gitops::failed",
        "gitops::rejected",
        "gitops::closed",
    )
    assert set(PHASE_TITLES) == set(ALL_LABELS)


@pytest.mark.parametrize("state", list(BindingState))
def test_label_change_adds_one_and_removes_all_others(state: BindingState) -> None:
    """The change for a state adds its label and removes every other phase label, nothing else."""
    add, remove = label_change(state)
    assert add == [label_for(state)]
    assert set(remove) == set(ALL_LABELS) - {label_for(state)}
    assert len(remove) == len(ALL_LABELS) - 1
    assert set(add).isdisjoint(remove)


@pytest.mark.parametrize(
    ("state", "label"),
    [
        (BindingState.APPROVAL_SENT, "gitops::awaiting-approval"),
        (BindingState.MR_CREATED, "gitops::checking"),
        (BindingState.MERGING, "gitops::merging"),
        (BindingState.VALIDATED, "gitops::in-effect"),
        (BindingState.HANDLE_FAILED, "gitops::failed"),
        (BindingState.CLOSED, "gitops::closed"),
    ],
)
def test_states_that_share_a_phase(state: BindingState, label: str) -> None:
    """States are grouped into phases as the README names them."""
    assert label_for(state) == label
