"""The coarse binding states, the fine step codes, the flows and the sets built from them."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class BindingState(StrEnum):
    """What users see: one per (subject, target), owned by one operation at a time."""

    APPROVAL_SENDING = "APPROVAL_SENDING"
    APPROVAL_SENT = "APPROVAL_SENT"
    MR_CREATING = "MR_CREATING"
    MR_CREATED = "MR_CREATED"
    MERGING = "MERGING"
    MERGED = "MERGED"
    VALIDATED = "VALIDATED"
    CREATE_FAILED = "CREATE_FAILED"
    HANDLE_FAILED = "HANDLE_FAILED"
    REJECTED = "REJECTED"
    CLOSED = "CLOSED"


class Flow(StrEnum):
    """The order of the steps, fixed for an operation when it is created."""

    APPROVE_FIRST = "approve_first"
    MR_FIRST = "mr_first"


class Phase(StrEnum):
    """Step phases; a step's code prefix (code // 100) names its phase."""

    CREATION = "creation"
    HANDLING = "handling"
    CLOSING = "closing"
    CALLBACK = "callback"
    APPROVAL = "approval"
    WAITING = "waiting"


_PHASE_BY_PREFIX = {
    100: Phase.CREATION,
    101: Phase.HANDLING,
    102: Phase.CLOSING,
    103: Phase.CALLBACK,
    104: Phase.APPROVAL,
    105: Phase.WAITING,
}


class Step(IntEnum):
    """Fine-grained step of an operation; numeric codes grouped by phase for metrics."""

    # creation: branch, commit, MR and its check pipeline
    CREATE_STARTED = 10001
    CREATE_SUCCEEDED = 10002
    CREATE_FAILED = 10003
    CREATE_PIPELINE_FAILED = 10004
    CREATE_PIPELINE_PASSED = 10005
    CREATE_OVERLOADED = 10006
    CREATE_TIMED_OUT = 10007
    CREATE_PATH_REFUSED = 10008
    CREATE_CHECKS_FAILED = 10009
    # handling: approve as each approval bot, merge, rebase
    HANDLE_STARTED = 10101
    HANDLE_APPROVED = 10102
    HANDLE_MERGED = 10103
    HANDLE_APPROVE_FAILED = 10104
    HANDLE_REBASE_CONFLICT = 10105
    HANDLE_MERGE_FAILED = 10106
    HANDLE_REBASING = 10107
    HANDLE_PIPELINE_FAILED = 10108
    HANDLE_PIPELINE_PASSED = 10109
    HANDLE_TIMED_OUT = 10110
    HANDLE_CHANGED_AFTER_APPROVAL = 10111
    # closing
    CLOSE_REJECTED = 10201
    CLOSE_WITHDRAWN = 10202
    CLOSE_CANCELLED = 10203
    CLOSE_MR_CLOSED = 10204
    # callbacks
    CALLED_BACK = 10301
    CALLBACK_VALIDATED = 10302
    CALLBACK_DEPLOY_FAILED = 10303
    # approval submission (not in DESIGN's list of ranges; 10401 is the free one between)
    APPROVAL_SUBMITTING = 10401
    APPROVAL_SUBMITTED = 10402
    APPROVAL_SUBMIT_FAILED = 10403
    APPROVAL_TIMED_OUT = 10404
    # waiting on something whose outcome is unknown: stays visible, "you can keep waiting"
    HANDLE_PIPELINE_PENDING = 10501
    CREATE_PIPELINE_PENDING = 10502
    APPROVAL_PENDING = 10503
    DEPLOY_PENDING = 10504

    @property
    def phase(self) -> Phase:
        """The phase this step belongs to, from its code prefix."""
        return _PHASE_BY_PREFIX[self.value // 100]


S = BindingState

#: Finished for good; only re-apply (and revert, from VALIDATED) leaves these.
TERMINAL: frozenset[BindingState] = frozenset({S.VALIDATED, S.REJECTED, S.CLOSED})

#: Stopped on a failure; an operator or user must retry or cancel.
FAILED: frozenset[BindingState] = frozenset({S.CREATE_FAILED, S.HANDLE_FAILED})

#: Anything else is in flight.
IN_FLIGHT: frozenset[BindingState] = frozenset(set(S) - TERMINAL - FAILED)

#: The single source of truth for "may this subject-target be requested again".
#: DESIGN lists {REJECTED, CLOSED}; VALIDATED is added on purpose: a finished change must not
#: block the next change to the same subject and target (see the README's state section).
REAPPLIABLE: frozenset[BindingState] = frozenset({S.VALIDATED, S.REJECTED, S.CLOSED})

#: An approval callback counts only in these (SENDING too: the callback can beat our SENT write).
AWAITING_APPROVAL: frozenset[BindingState] = frozenset({S.APPROVAL_SENDING, S.APPROVAL_SENT})

#: A merged or validated change may be reverted by a new change that undoes it.
REVERTIBLE: frozenset[BindingState] = frozenset({S.MERGED, S.VALIDATED})


#: Steps in which an operation waits for its MR's check pipeline (a pipeline event moves it).
AWAITING_PIPELINE: frozenset[Step] = frozenset(
    {
        Step.CREATE_SUCCEEDED,
        Step.CREATE_PIPELINE_PENDING,
        Step.HANDLE_REBASING,
        Step.HANDLE_PIPELINE_PENDING,
    }
)

#: The pipeline waits that outlived their poll tiers: read again at a low rate
#: (`poll.pending_tiers`), and at once when an MR event or a pipeline event comes.
PENDING_PIPELINE: frozenset[Step] = frozenset(
    {Step.CREATE_PIPELINE_PENDING, Step.HANDLE_PIPELINE_PENDING}
)


#: Stops after which a re-apply (API or `/gitops apply`) may start a new request in place: the
#: content is not what was approved or allowed, so retrying the old request cannot help.
REAPPLY_AFTER: frozenset[Step] = frozenset(
    {Step.HANDLE_CHANGED_AFTER_APPROVAL, Step.CREATE_PATH_REFUSED, Step.CREATE_CHECKS_FAILED}
)


class WaitKind(StrEnum):
    """What bounds the time an in-flight state may last."""

    STEP = "step"  # a running step: re-driven past GITOPS_STEP_TIMEOUT
    PIPELINE = "pipeline"  # a check pipeline: polled in tiers, then pending
    PEOPLE = "people"  # approvers decide; reconciled against the approval system
    DEPLOY = "deploy"  # the deployment pipeline; reconciled
    OPERATOR = "operator"  # a failure waiting for retry or cancel: an alert state


#: Every non-terminal state with what bounds it (checked by `gitops-bot transitions check`).
WAITS: dict[BindingState, WaitKind] = {
    S.APPROVAL_SENDING: WaitKind.STEP,
    S.APPROVAL_SENT: WaitKind.PEOPLE,
    S.MR_CREATING: WaitKind.PIPELINE,
    S.MR_CREATED: WaitKind.STEP,
    S.MERGING: WaitKind.STEP,
    S.MERGED: WaitKind.DEPLOY,
    S.CREATE_FAILED: WaitKind.OPERATOR,
    S.HANDLE_FAILED: WaitKind.OPERATOR,
}
