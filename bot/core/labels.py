"""The one mapping from binding state to the MR's scoped phase label (the README's "On the merge
request"); pure."""

from __future__ import annotations

from typing import NamedTuple

from bot.core.states import BindingState
from bot.core.states import BindingState as S

#: GitLab's scoped-label prefix for every label the bot sets.
SCOPE = "gitops::"

#: The phase label of each binding state: one each, several states share a phase.
LABELS: dict[BindingState, str] = {
    S.APPROVAL_SENDING: "gitops::awaiting-approval",
    S.APPROVAL_SENT: "gitops::awaiting-approval",
    S.MR_CREATING: "gitops::checking",
    S.MR_CREATED: "gitops::checking",
    S.MERGING: "gitops::merging",
    S.MERGED: "gitops::merged",
    S.VALIDATED: "gitops::in-effect",
    S.CREATE_FAILED: "gitops::failed",
    S.HANDLE_FAILED: "gitops::failed",
    S.REJECTED: "gitops::rejected",
    S.CLOSED: "gitops::closed",
}

#: Every phase label, in workflow order.
ALL_LABELS: tuple[str, ...] = tuple(dict.fromkeys(LABELS.values()))

#: The phase in words, as the status comment names it, by label.
PHASE_TITLES: dict[str, str] = {
    "gitops::awaiting-approval": "Awaiting approval",
    "gitops::checking": "Checking",
    "gitops::merging": "Merging",
    "gitops::merged": "Merged",
    "gitops::in-effect": "In effect",
    "gitops::failed": "Failed",
    "gitops::rejected": "Rejected",
    "gitops::closed": "Closed",
}


class LabelChange(NamedTuple):
    """One labels call: the phase label to add and every other phase label to remove."""

    add: list[str]
    remove: list[str]


def label_for(state: BindingState) -> str:
    """The phase label of `state`."""
    return LABELS[state]


def phase_title(state: BindingState) -> str:
    """The phase of `state` in words ("Checking")."""
    return PHASE_TITLES[LABELS[state]]


def label_change(state: BindingState) -> LabelChange:
    """Adds `state`'s label and removes all the other gitops:: phase labels, in one call."""
    label = LABELS[state]
    return LabelChange([label], [other for other in ALL_LABELS if other != label])
