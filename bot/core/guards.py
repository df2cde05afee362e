"""The snapshot guards read, and the named guards the transition table refers to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.core.states import REAPPLY_AFTER, Flow, Phase, Step


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a guard may look at: the operation as it is (or will be, for a new one)."""

    flow: Flow
    step: Step | None = None
    has_mr: bool = False
    mr_opened_by_bot: bool = False
    approved: bool = False
    has_approval_request: bool = False
    #: a new request: the step of the operation that owns the binding now (None: no binding)
    prior_step: Step | None = None


def approve_first(s: Snapshot) -> bool:
    """The operation asks for approval before any MR exists."""
    return s.flow is Flow.APPROVE_FIRST


def mr_first(s: Snapshot) -> bool:
    """The MR exists (or is made) first; approval carries its iid in ext.mrId."""
    return s.flow is Flow.MR_FIRST


def has_mr(s: Snapshot) -> bool:
    """The operation has an MR to show its status on."""
    return s.has_mr


def bot_opened_mr(s: Snapshot) -> bool:
    """The MR was opened by the bot (a person's MR is never closed by us)."""
    return s.has_mr and s.mr_opened_by_bot


def approval_in_flight(s: Snapshot) -> bool:
    """An approval request exists and has not been decided in our favour."""
    return s.has_approval_request and not s.approved


def retry_approval(s: Snapshot) -> bool:
    """A retry must go back to the approval step: it stopped before approval was given."""
    if s.approved:
        return False
    return s.flow is Flow.APPROVE_FIRST or (s.step is not None and s.step.phase is Phase.APPROVAL)


def retry_creation(s: Snapshot) -> bool:
    """A retry must go back to creating (or re-checking) the MR."""
    return not retry_approval(s)


def retry_handling(s: Snapshot) -> bool:
    """A retry may approve and merge again: not when the content changed after approval (it
    would approve what nobody approved; a re-apply asks for a new approval instead)."""
    return s.step is not Step.HANDLE_CHANGED_AFTER_APPROVAL


def reapply_approve_first(s: Snapshot) -> bool:
    """A re-apply after the content stopped a request (changed after approval, path refused)."""
    return s.prior_step in REAPPLY_AFTER and approve_first(s)


def reapply_mr_first(s: Snapshot) -> bool:
    """The MR-first re-apply after the content stopped a request."""
    return s.prior_step in REAPPLY_AFTER and mr_first(s)


Guard = Callable[[Snapshot], bool]

#: Guards by the name the transition table uses.
GUARDS: dict[str, Guard] = {
    f.__name__: f
    for f in (
        approve_first,
        mr_first,
        has_mr,
        bot_opened_mr,
        approval_in_flight,
        retry_approval,
        retry_creation,
        retry_handling,
        reapply_approve_first,
        reapply_mr_first,
    )
}
