"""What a requester should make of a state and step: one hint, in words (pure, no IO)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.core.states import FAILED, BindingState, Phase, Step
from bot.core.states import BindingState as S

HintKind = Literal["in_progress", "waiting", "pending", "failed", "done", "closed"]

#: Every hint kind, for schemas and tests.
HINT_KINDS: tuple[HintKind, ...] = (
    "in_progress",
    "waiting",
    "pending",
    "failed",
    "done",
    "closed",
)


@dataclass(frozen=True, slots=True)
class Hint:
    """What the requester sees next to the phase: a kind for machines, a sentence for people."""

    kind: HintKind
    text: str


#: Every step in words, as it reads after "while" or as a status line.
STEP_WORDS: dict[Step, str] = {
    Step.CREATE_STARTED: "creating the branch, the commit and the merge request",
    Step.CREATE_SUCCEEDED: "waiting for the merge request's check pipeline",
    Step.CREATE_FAILED: "creating the branch, the commit or the merge request",
    Step.CREATE_PIPELINE_FAILED: "running the merge request's check pipeline",
    Step.CREATE_PIPELINE_PASSED: "the check pipeline passed; handling the merge request",
    Step.CREATE_OVERLOADED: "accepting the request (the bot's work queue was full)",
    Step.CREATE_TIMED_OUT: "creating the merge request (it did not finish in time)",
    Step.CREATE_PATH_REFUSED: "checking the paths the change touches",
    Step.CREATE_CHECKS_FAILED: "checking the changed files before the approval request",
    Step.HANDLE_STARTED: "approving and merging the merge request",
    Step.HANDLE_APPROVED: "merging the approved merge request",
    Step.HANDLE_MERGED: "merged; waiting for the deployment to put the change in effect",
    Step.HANDLE_APPROVE_FAILED: "approving the merge request as the approval bots",
    Step.HANDLE_REBASE_CONFLICT: "rebasing the merge request (it conflicts with its target)",
    Step.HANDLE_MERGE_FAILED: "merging the merge request",
    Step.HANDLE_REBASING: "rebasing the merge request onto its target branch",
    Step.HANDLE_PIPELINE_FAILED: "running the pipeline before the merge",
    Step.HANDLE_PIPELINE_PASSED: "the pipeline passed; merging",
    Step.HANDLE_TIMED_OUT: "approving and merging (it did not finish in time)",
    Step.HANDLE_CHANGED_AFTER_APPROVAL: "checking the merge request against what was approved",
    Step.CLOSE_REJECTED: "the approvers rejected the request",
    Step.CLOSE_WITHDRAWN: "the approval request was withdrawn",
    Step.CLOSE_CANCELLED: "the request was cancelled",
    Step.CLOSE_MR_CLOSED: "the merge request was closed",
    Step.CALLED_BACK: "the approval system approved the request",
    Step.CALLBACK_VALIDATED: "the deployment confirmed the change is in effect",
    Step.CALLBACK_DEPLOY_FAILED: "deploying the merged change (the deployment pipeline failed)",
    Step.APPROVAL_SUBMITTING: "submitting the request to the approval system",
    Step.APPROVAL_SUBMITTED: "waiting for the approvers to decide",
    Step.APPROVAL_SUBMIT_FAILED: "submitting the request to the approval system",
    Step.APPROVAL_TIMED_OUT: "waiting for the approvers (no decision in time)",
    Step.HANDLE_PIPELINE_PENDING: "waiting for the pipeline before the merge",
    Step.CREATE_PIPELINE_PENDING: "waiting for the merge request's check pipeline",
    Step.APPROVAL_PENDING: "waiting for the approvers to decide",
    Step.DEPLOY_PENDING: "waiting for the deployment pipeline to confirm the change",
}

#: What to do about a failure besides contacting the maintainers; every failure state can be
#: retried (the table has a RETRY row for each), so this says when a retry helps.
_RETRY_ADVICE: dict[Step, str] = {
    Step.CREATE_OVERLOADED: "retry in a few minutes, when the load has dropped",
    Step.CREATE_TIMED_OUT: "retry: the step is safe to run again",
    Step.HANDLE_TIMED_OUT: "retry: the step is safe to run again",
    Step.CREATE_PIPELINE_FAILED: "fix the change so its pipeline passes, then retry",
    Step.HANDLE_PIPELINE_FAILED: "fix the change so its pipeline passes, then retry",
    Step.HANDLE_REBASE_CONFLICT: "resolve the conflict on the branch, then retry",
}
_DEFAULT_RETRY_ADVICE = "retry once the cause is fixed"

#: Stops a retry cannot mend: the content is not what was approved or allowed (REAPPLY_AFTER).
_CONTENT_STOPS: dict[Step, str] = {
    Step.HANDLE_CHANGED_AFTER_APPROVAL: (
        "changed after approval: the merge request no longer matches what the approvers "
        "approved, so the bot neither approved nor merged it and took its approvals back"
    ),
}

#: What an unknown outcome waits for; "you can keep waiting" goes in front of it.
_PENDING: dict[Step, str] = {
    Step.HANDLE_PIPELINE_PENDING: "the pipeline before the merge has not finished yet",
    Step.CREATE_PIPELINE_PENDING: "the merge request's check pipeline has not finished yet",
    Step.APPROVAL_PENDING: "the approvers have not decided yet",
    Step.DEPLOY_PENDING: "the deployment pipeline has not confirmed the change yet",
}

_CLOSED_DEFAULT = {
    S.REJECTED: "the request was rejected",
    S.CLOSED: "the request was closed",
}


def words(step: Step) -> str:
    """The step in words."""
    return STEP_WORDS.get(step, step.name.lower().replace("_", " "))


def hint_for(state: BindingState, step: Step) -> Hint:
    """The hint for an operation in `state` at `step`."""
    if state in FAILED or (state is S.MERGED and step is Step.CALLBACK_DEPLOY_FAILED):
        return _failed(state, step)
    if step.phase is Phase.WAITING:
        what = _PENDING.get(step, words(step))
        return Hint(
            "pending",
            f"Pending: {what}. The outcome is unknown, not failed; you can keep waiting, "
            "the bot still picks up the result. An operator can confirm or retry it.",
        )
    if state is S.APPROVAL_SENT:
        return Hint("waiting", "Waiting for the approvers to decide in the approval system.")
    if state is S.VALIDATED:
        return Hint("done", "Done: the deployment confirmed the change is in effect.")
    if state in (S.REJECTED, S.CLOSED):
        why = STEP_WORDS.get(step) if step.phase is Phase.CLOSING else None
        why = why or _CLOSED_DEFAULT[state]
        return Hint(
            "closed",
            f"Closed: {why}; nothing more will happen. Submit a new request to try again.",
        )
    return Hint("in_progress", f"In progress: {words(step)}.")


def _failed(state: BindingState, step: Step) -> Hint:
    """A deterministic failure: what failed, whom to ask, and whether a retry can help."""
    if state is S.MERGED:
        return Hint(
            "failed",
            f"Failed while {words(step)}: the change is merged but not in effect. "
            f"Please contact the maintainers; {_DEFAULT_RETRY_ADVICE}.",
        )
    stop = _CONTENT_STOPS.get(step)
    if stop is not None:
        return Hint(
            "failed",
            f"Failed while {words(step)}: {stop}. Re-apply (the API or /gitops apply) to request "
            "a new approval for the content as it is now; a retry cannot help. Please contact the "
            "maintainers if this is unexpected.",
        )
    if step is Step.CREATE_PATH_REFUSED:
        return Hint(
            "failed",
            f"Failed while {words(step)}: it touches a path the bot may not change (a protected "
            "path or a file the CI configuration includes), so nothing was approved or merged. "
            "Change the paths and re-apply, or contact the maintainers to allow them, then retry.",
        )
    if step is Step.CREATE_CHECKS_FAILED:
        return Hint(
            "failed",
            f"Failed while {words(step)}: a file does not parse or does not match its JSON "
            "Schema (the error lists file:line:column), so nobody was asked to approve it. Fix "
            "those files and re-apply (on a person's merge request: push the fix, then retry). "
            "Please contact the maintainers if a schema seems wrong.",
        )
    advice = _RETRY_ADVICE.get(step, _DEFAULT_RETRY_ADVICE)
    return Hint(
        "failed",
        f"Failed while {words(step)}. Please contact the maintainers if the cause is unclear; "
        f"{advice}.",
    )
