"""What a workflow step decided to do, as data: the pure functions in steps/decide.py return one,
and steps/perform.py does it (functional core, imperative shell)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bot.core.events import Event
from bot.gitlab.views import MrView

#: What a poll waits for: the MR's head pipeline, GitLab's rebase, a pipeline wait that went
#: pending, the MR's car on GitLab's merge train, or GitLab to let a merge through (the
#: `poll.<kind>_tiers` flag).
PollKind = Literal["pipeline", "rebase", "pending", "train", "merge"]


@dataclass(frozen=True)
class Verdict:
    """Whether the MR may be approved and merged at `head`, and if not, why."""

    head: str
    reasons: tuple[str, ...] = ()
    #: the target branch's head commit the MR was compared with (None: not compared)
    target: str | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        """True when the MR's changes are the approved ones."""
        return not self.reasons


@dataclass(frozen=True)
class Advance:
    """Fire `event` for the operation, setting these operation columns with it."""

    event: Event
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Poll:
    """Look again after the next poll tier; PIPELINE_TIMED_OUT once the tiers or the wait's
    time are used up ("pending": it stays pending, moved only by an event or an operator)."""

    kind: PollKind
    #: what GitLab said the wait is for ("status_checks_must_pass"): shown on the status comment
    why: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Later:
    """Run the step again in `seconds` (recording `progress`); `pinned`: only if unmoved."""

    seconds: float
    progress: dict[str, Any] | None = None
    pinned: bool = True


@dataclass(frozen=True)
class Restart:
    """Start approving again on the current head, keeping only the restart count in `progress`:
    by the RETRY event when the approvals were given (`by_event`), else by running the step
    again a second later."""

    why: str
    progress: dict[str, Any]
    by_event: bool


@dataclass(frozen=True)
class StopChanged:
    """The MR is not the approved change: HANDLE_FAILED "changed after approval"."""

    verdict: Verdict


@dataclass(frozen=True)
class Approve:
    """Approve `sha` as every approval bot not yet in `progress["approved"]`, then
    APPROVALS_GIVEN with this progress."""

    sha: str
    progress: dict[str, Any]
    #: the target branch's head commit the check before approving compared the MR with
    compared_at: str | None = field(default=None, compare=False)
    #: read the MR's approvals before approving (False: GitLab says the MR is not approved and
    #: no account tried on this head yet: nothing of ours can be there to find)
    read_first: bool = field(default=True, compare=False)


@dataclass(frozen=True)
class Merge:
    """Merge the MR (as just read: `mr`; None: merge() reads it) pinned to the checked head
    `sha`; the outcome is decided again (steps/decide.py decide_merge)."""

    sha: str
    mr: MrView | None
    progress: dict[str, Any]
    #: approved by this very step just now: the `mr` read before it still says "not_approved"
    approved_now: bool = False


@dataclass(frozen=True)
class Rebase:
    """GitLab says the checked head `sha` must be rebased before it can merge: rebase it now,
    before any approval (a rebase would make them over again); the outcome is decided as a
    merge attempt's (steps/decide.py decide_merge)."""

    sha: str
    progress: dict[str, Any]


@dataclass(frozen=True)
class LeaveTrain:
    """GitLab will not take the change on a merge train (trains off, no licence): it merges
    through the bot's own merge queue instead, joining its line now."""

    reason: str


#: Everything a step may decide; steps/perform.py handles each one.
StepDecision = (
    Advance | Poll | Later | Restart | StopChanged | Approve | Merge | Rebase | LeaveTrain
)
