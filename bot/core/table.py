"""The one transition table: every legal (from, event) -> (to, step), with named guards.

`fire()` in `bot/store` is the only writer of state and accepts nothing that is not here.
Rows are tried in order; the first whose guard passes wins. `None` as a source means "no
binding yet": the first request for a subject and target.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from bot.core.events import Event as E
from bot.core.guards import GUARDS, Snapshot
from bot.core.states import FAILED, IN_FLIGHT, REAPPLIABLE, REVERTIBLE, BindingState, Step
from bot.core.states import BindingState as S


class Effect(StrEnum):
    """A side effect that must not be lost: written to the outbox with the transition."""

    STATUS_COMMENT = "status_comment"
    LABELS = "labels"
    CLOSE_MR = "close_mr"
    WITHDRAW_APPROVAL = "withdraw_approval"
    #: the approver accounts take back their approvals (the content changed after approval)
    UNAPPROVE = "unapprove"
    #: the API submitter's callback_url is told of a phase change (written by fire() itself, once
    #: per operation and phase, when the operation has a callback_url; never by a table row)
    CALLBACK = "callback"
    #: the bot's merged `gitops/<id>` branch is deleted: GitLab never removes a protected
    #: source branch on merge (`can_remove_source_branch?`), and deleting one needs Maintainer
    DELETE_BRANCH = "delete_branch"


#: Every transition updates the MR's status comment and label (when there is an MR).
DEFAULT_EFFECTS: tuple[Effect, ...] = (Effect.STATUS_COMMENT, Effect.LABELS)

#: An effect is written only when its guard holds on the operation after the transition.
EFFECT_GUARDS: dict[Effect, str] = {
    Effect.STATUS_COMMENT: "has_mr",
    Effect.LABELS: "has_mr",
    Effect.CLOSE_MR: "bot_opened_mr",
    Effect.WITHDRAW_APPROVAL: "approval_in_flight",
    Effect.UNAPPROVE: "has_mr",
    Effect.DELETE_BRANCH: "bot_opened_mr",
}


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the table."""

    source: BindingState | None
    event: E
    target: BindingState
    step: Step
    guard: str | None = None
    effects: tuple[Effect, ...] = ()
    #: an operation timestamp column this transition sets to "now" (e.g. approved_at)
    stamp: str | None = None

    def effects_for(self, after: Snapshot) -> list[Effect]:
        """The outbox effects this transition writes for the operation as it is afterwards."""
        wanted = (*DEFAULT_EFFECTS, *self.effects)
        return [e for e in wanted if GUARDS[EFFECT_GUARDS[e]](after)]


def _rows(
    sources: Iterable[BindingState | None],
    event: E,
    target: BindingState | None,
    step: Step,
    guard: str | None = None,
    effects: tuple[Effect, ...] = (),
    stamp: str | None = None,
) -> Iterator[Transition]:
    """The same row from several sources (`target=None`: stay in the source state)."""
    for src in sources:
        to = target if target is not None else src
        assert to is not None
        yield Transition(src, event, to, step, guard, effects, stamp)


_START = (None, *sorted(REAPPLIABLE))
_CANCELLABLE = sorted((IN_FLIGHT - {S.MERGED}) | FAILED)
_WITH_MR_OPEN = (S.MR_CREATING, S.MR_CREATED, S.APPROVAL_SENDING, S.APPROVAL_SENT, S.MERGING)
_STOP = (Effect.WITHDRAW_APPROVAL, Effect.CLOSE_MR)

TABLE: tuple[Transition, ...] = (
    # -- start, re-apply (reset in place with a new operation id), revert --------------------
    *_rows(_START, E.SUBMIT, S.APPROVAL_SENDING, Step.APPROVAL_SUBMITTING, "approve_first"),
    *_rows(_START, E.SUBMIT, S.MR_CREATING, Step.CREATE_STARTED, "mr_first"),
    *_rows(
        sorted(REVERTIBLE), E.REVERT, S.APPROVAL_SENDING, Step.APPROVAL_SUBMITTING, "approve_first"
    ),
    *_rows(sorted(REVERTIBLE), E.REVERT, S.MR_CREATING, Step.CREATE_STARTED, "mr_first"),
    # a re-apply after the content stopped the request (changed after approval, path refused)
    *_rows(
        sorted(FAILED),
        E.SUBMIT,
        S.APPROVAL_SENDING,
        Step.APPROVAL_SUBMITTING,
        "reapply_approve_first",
    ),
    *_rows(sorted(FAILED), E.SUBMIT, S.MR_CREATING, Step.CREATE_STARTED, "reapply_mr_first"),
    # -- overload: a bounded queue refuses new work explicitly --------------------------------
    Transition(S.APPROVAL_SENDING, E.OVERLOADED, S.CREATE_FAILED, Step.CREATE_OVERLOADED),
    Transition(S.MR_CREATING, E.OVERLOADED, S.CREATE_FAILED, Step.CREATE_OVERLOADED),
    # -- approval ------------------------------------------------------------------------------
    Transition(S.APPROVAL_SENDING, E.APPROVAL_SUBMITTED, S.APPROVAL_SENT, Step.APPROVAL_SUBMITTED),
    Transition(
        S.APPROVAL_SENDING, E.APPROVAL_SUBMIT_FAILED, S.CREATE_FAILED, Step.APPROVAL_SUBMIT_FAILED
    ),
    Transition(S.APPROVAL_SENT, E.APPROVAL_TIMED_OUT, S.APPROVAL_SENT, Step.APPROVAL_PENDING),
    # the callback may beat our SENT write, so SENDING accepts it too
    *_rows(
        (S.APPROVAL_SENDING, S.APPROVAL_SENT),
        E.APPROVED,
        S.MR_CREATING,
        Step.CALLED_BACK,
        "approve_first",
        stamp="approved_at",
    ),
    *_rows(
        (S.APPROVAL_SENDING, S.APPROVAL_SENT),
        E.APPROVED,
        S.MERGING,
        Step.CALLED_BACK,
        "mr_first",
        stamp="approved_at",
    ),
    *_rows(
        (S.APPROVAL_SENDING, S.APPROVAL_SENT),
        E.REJECTED,
        S.REJECTED,
        Step.CLOSE_REJECTED,
        effects=(Effect.CLOSE_MR,),
    ),
    *_rows(
        (S.APPROVAL_SENDING, S.APPROVAL_SENT),
        E.WITHDRAWN,
        S.REJECTED,
        Step.CLOSE_WITHDRAWN,
        effects=(Effect.CLOSE_MR,),
    ),
    # -- a path the policy refuses (a protected path, a CI include): nobody is asked -----------
    *_rows(
        (S.APPROVAL_SENDING, S.MR_CREATING, S.MR_CREATED),
        E.PATH_REFUSED,
        S.CREATE_FAILED,
        Step.CREATE_PATH_REFUSED,
    ),
    # -- a changed file its validators refuse (bot/app/checks): checked right before the
    # approval request, in both flows; nobody is asked ------------------------------------
    Transition(S.APPROVAL_SENDING, E.CHECKS_FAILED, S.CREATE_FAILED, Step.CREATE_CHECKS_FAILED),
    # -- creation: branch, commit, MR, then its check pipeline --------------------------------
    Transition(S.MR_CREATING, E.MR_OPENED, S.MR_CREATING, Step.CREATE_SUCCEEDED),
    Transition(S.MR_CREATING, E.CREATE_ERROR, S.CREATE_FAILED, Step.CREATE_FAILED),
    Transition(S.MR_CREATED, E.CREATE_ERROR, S.CREATE_FAILED, Step.CREATE_FAILED),
    Transition(
        S.MR_CREATING, E.PIPELINE_PASSED, S.MR_CREATED, Step.CREATE_PIPELINE_PASSED, "has_mr"
    ),
    Transition(S.MR_CREATING, E.PIPELINE_FAILED, S.CREATE_FAILED, Step.CREATE_PIPELINE_FAILED),
    Transition(S.MR_CREATING, E.PIPELINE_TIMED_OUT, S.MR_CREATING, Step.CREATE_PIPELINE_PENDING),
    Transition(S.MR_CREATED, E.HANDLE_START, S.MERGING, Step.HANDLE_STARTED, "approve_first"),
    Transition(
        S.MR_CREATED, E.REQUEST_APPROVAL, S.APPROVAL_SENDING, Step.APPROVAL_SUBMITTING, "mr_first"
    ),
    # -- handling: approve as each approval bot, merge pinned to the SHA, rebase ------------
    Transition(S.MERGING, E.APPROVALS_GIVEN, S.MERGING, Step.HANDLE_APPROVED),
    Transition(S.MERGING, E.APPROVE_ERROR, S.HANDLE_FAILED, Step.HANDLE_APPROVE_FAILED),
    Transition(S.MERGING, E.REBASE_STARTED, S.MERGING, Step.HANDLE_REBASING),
    Transition(S.MERGING, E.REBASE_CONFLICT, S.HANDLE_FAILED, Step.HANDLE_REBASE_CONFLICT),
    Transition(S.MERGING, E.PIPELINE_PASSED, S.MERGING, Step.HANDLE_PIPELINE_PASSED),
    Transition(S.MERGING, E.PIPELINE_FAILED, S.HANDLE_FAILED, Step.HANDLE_PIPELINE_FAILED),
    Transition(S.MERGING, E.PIPELINE_TIMED_OUT, S.MERGING, Step.HANDLE_PIPELINE_PENDING),
    Transition(S.MERGING, E.MERGE_ERROR, S.HANDLE_FAILED, Step.HANDLE_MERGE_FAILED),
    # the MR's changes differ from the approved change identity: never approved nor merged
    Transition(
        S.MERGING,
        E.CHANGED_AFTER_APPROVAL,
        S.HANDLE_FAILED,
        Step.HANDLE_CHANGED_AFTER_APPROVAL,
        effects=(Effect.UNAPPROVE,),
    ),
    Transition(
        S.MERGING,
        E.MERGED,
        S.MERGED,
        Step.HANDLE_MERGED,
        effects=(Effect.DELETE_BRANCH,),
        stamp="merged_at",
    ),
    # -- validation: the deployment pipeline says the change is in effect -------------------
    Transition(S.MERGED, E.DEPLOYED, S.VALIDATED, Step.CALLBACK_VALIDATED),
    Transition(S.MERGED, E.DEPLOY_FAILED, S.MERGED, Step.CALLBACK_DEPLOY_FAILED),
    Transition(S.MERGED, E.DEPLOY_TIMED_OUT, S.MERGED, Step.DEPLOY_PENDING),
    # -- the MR closed by a person, or the request cancelled ---------------------------------
    *_rows(
        _WITH_MR_OPEN,
        E.MR_CLOSED,
        S.CLOSED,
        Step.CLOSE_MR_CLOSED,
        "has_mr",
        effects=(Effect.WITHDRAW_APPROVAL,),
    ),
    *_rows(_CANCELLABLE, E.CANCEL, S.CLOSED, Step.CLOSE_CANCELLED, effects=_STOP),
    # -- operator retry: re-drive the step where the request stopped (steps are idempotent) ---
    *_rows(
        (S.APPROVAL_SENDING, S.APPROVAL_SENT), E.RETRY, S.APPROVAL_SENDING, Step.APPROVAL_SUBMITTING
    ),
    Transition(S.MR_CREATING, E.RETRY, S.MR_CREATING, Step.CREATE_STARTED),
    Transition(S.MR_CREATED, E.RETRY, S.MR_CREATED, Step.CREATE_PIPELINE_PASSED),
    Transition(S.MERGING, E.RETRY, S.MERGING, Step.HANDLE_STARTED),
    Transition(S.MERGED, E.RETRY, S.MERGED, Step.HANDLE_MERGED),
    Transition(
        S.CREATE_FAILED, E.RETRY, S.APPROVAL_SENDING, Step.APPROVAL_SUBMITTING, "retry_approval"
    ),
    Transition(S.CREATE_FAILED, E.RETRY, S.MR_CREATING, Step.CREATE_STARTED, "retry_creation"),
    Transition(S.HANDLE_FAILED, E.RETRY, S.MERGING, Step.HANDLE_STARTED, "retry_handling"),
    # -- a running step past its deadline and retry budget (the sweep) ------------------------
    Transition(
        S.APPROVAL_SENDING, E.DEADLINE_EXPIRED, S.CREATE_FAILED, Step.APPROVAL_SUBMIT_FAILED
    ),
    Transition(S.MR_CREATING, E.DEADLINE_EXPIRED, S.CREATE_FAILED, Step.CREATE_TIMED_OUT),
    Transition(S.MR_CREATED, E.DEADLINE_EXPIRED, S.CREATE_FAILED, Step.CREATE_TIMED_OUT),
    Transition(S.MERGING, E.DEADLINE_EXPIRED, S.HANDLE_FAILED, Step.HANDLE_TIMED_OUT),
)


def candidates(source: BindingState | None, event: E) -> list[Transition]:
    """The rows for (source, event), in table order."""
    return _INDEX.get((source, event), [])


def _index(table: Iterable[Transition]) -> dict[tuple[BindingState | None, E], list[Transition]]:
    index: dict[tuple[BindingState | None, E], list[Transition]] = {}
    for row in table:
        index.setdefault((row.source, row.event), []).append(row)
    return index


_INDEX = _index(TABLE)
