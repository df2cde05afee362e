"""What an operation's next step is, from where it stands; and how long the next poll waits."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from bot.core.states import BindingState, Flow, Step
from bot.core.states import BindingState as S


class Action(StrEnum):
    """The step function the driver runs next (or what the operation waits for)."""

    SUBMIT_APPROVAL = "submit_approval"
    AWAIT_APPROVAL = "await_approval"  # people decide; the status is read when a deadline passes
    CREATE_MR = "create_mr"  # make (or adopt) the branch, commit and MR
    POLL_PIPELINE = "poll_pipeline"  # the MR's check pipeline
    START_HANDLING = "start_handling"  # approve-first: checks passed, go approve and merge
    REQUEST_APPROVAL = "request_approval"  # MR-first: checks passed, ask for approval
    HANDLE = "handle"  # approve as each approval bot, then merge
    POLL_REBASE = "poll_rebase"  # a rebase GitLab is doing, then the pipeline on the new head
    POLL_PENDING = "poll_pending"  # a pipeline wait past its tiers: the MR read again, rarely
    AWAIT_DEPLOY = "await_deploy"  # the deployment's word; reconciliation finds lost ones
    NONE = "none"  # finished or failed: a person or an event moves it


#: Steps after which the check pipeline is awaited by polling.
_POLLING_CREATE = frozenset({Step.CREATE_SUCCEEDED})


def next_action(state: BindingState, step: Step, flow: Flow) -> Action:
    """Decides which step function runs for an operation in (state, step) of this flow."""
    match state:
        case S.APPROVAL_SENDING:
            return Action.SUBMIT_APPROVAL
        case S.APPROVAL_SENT:
            return Action.AWAIT_APPROVAL
        case S.MR_CREATING:
            if step in _POLLING_CREATE:
                return Action.POLL_PIPELINE
            if step is Step.CREATE_PIPELINE_PENDING:
                # timed out: a late webhook, an MR event, a slow poll or an operator moves it
                return Action.POLL_PENDING
            return Action.CREATE_MR
        case S.MR_CREATED:
            return Action.START_HANDLING if flow is Flow.APPROVE_FIRST else Action.REQUEST_APPROVAL
        case S.MERGING:
            if step is Step.HANDLE_REBASING:
                return Action.POLL_REBASE
            if step is Step.HANDLE_PIPELINE_PENDING:
                return Action.POLL_PENDING
            return Action.HANDLE
        case S.MERGED:
            return Action.AWAIT_DEPLOY
        case _:
            return Action.NONE


def poll_interval(tiers: Sequence[Sequence[int]], polls_done: int) -> int | None:
    """Seconds until poll number `polls_done + 1`, or None when the tiers are used up.

    `tiers` is [[interval_seconds, polls], ...]: short intervals first, then longer ones.
    """
    remaining = polls_done
    for interval, polls in tiers:
        if remaining < polls:
            return max(1, int(interval))
        remaining -= polls
    return None
