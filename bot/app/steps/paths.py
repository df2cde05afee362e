"""The path policy where the bot writes the change itself: checked against the CI configuration
of the target branch before anyone is asked to approve and before anything is committed.

The CI configuration's closure (bot/app/ci_closure.py) is walked at `ci_commit(op)` and
recorded on the change (`operations.ci_closure`), so the check before the merge reuses it while
the target branch stays at that commit. A closure the bot cannot take to the end refuses the
change (PATH_REFUSED) with the reason: fail closed.

A Maintainer's authority (to change the policy file and the paths it protects) covers what the
Maintainer saw when asking, never what the change became later (`maintainer_authority`):

- a change the bot writes (`/gitops revert`) holds the files fixed when the Maintainer asked,
  and merge integrity (steps/integrity.py) holds its MR to exactly them;
- a person's MR (`/gitops apply`) is covered at the head the Maintainer applied at
  (`operations.maintainer_sha`, recorded with the command) and at no other: a push after the
  apply, even before the pipeline passes, leaves its Maintainer-only paths refused, before
  approval, with the reason (MOVED) on each; a Maintainer applies again to cover the new head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.app import policy
from bot.app.ci_closure import ci_closure, explained, unresolved
from bot.app.steps import StepContext
from bot.app.steps.common import advance
from bot.core.events import Event
from bot.core.path_policy import describe, refused_paths
from bot.gitlab import Project
from bot.policy.ci_yaml import CiConfigUnresolved
from bot.store.operations import OperationRow, touch

#: Why a Maintainer's authority does not cover a person's MR whose head moved after the apply.
MOVED = "changed after a Maintainer's /gitops apply; a Maintainer must apply again"
#: Why it does not cover one applied before the head was recorded (in flight at the upgrade).
UNBOUND = (
    "no merge request head is bound to the Maintainer's /gitops apply (it was applied before "
    "heads were recorded); a Maintainer must apply again"
)


@dataclass(frozen=True, slots=True)
class Authority:
    """Whether a Maintainer's authority covers the change as checked, and if not, why (None:
    no Maintainer asked, nothing to explain)."""

    maintainer: bool
    lost: str | None = None


def maintainer_authority(op: OperationRow, head: str | None) -> Authority:
    """Whether the Maintainer who asked for `op` covers it with its MR at `head`."""
    if not op.maintainer_request:
        return Authority(False)
    if op.files:
        return Authority(True)  # the bot writes these files, fixed when the Maintainer asked
    if op.maintainer_sha is None:
        return Authority(False, UNBOUND)
    if head != op.maintainer_sha:
        return Authority(False, MOVED)
    return Authority(True)


def ci_commit(op: OperationRow) -> str:
    """The commit the CI configuration is read at before approval: the target branch's head
    recorded when the change started, else (not recorded) the branch itself."""
    return op.policy_sha or op.target_branch


def check_paths(ctx: StepContext, project: Project, paths: Sequence[str]) -> bool:
    """True when the policy allows every path; else the change stops (PATH_REFUSED) naming them.

    The static rules (with the policy recorded on the change) were checked when the request
    came in; this adds every file the project's CI configuration includes, walked at
    `ci_commit(op)` (one read per file; the walk is recorded on the change), and holds a
    person's MR to the head its Maintainer applied at (`op.head_sha`: the head whose changes
    are about to be approved).
    """
    op = ctx.op
    rules = policy.of(op)
    settings = ctx.services.settings
    authority = maintainer_authority(op, op.head_sha)
    try:
        closure = ci_closure(project, ci_commit(op))
    except CiConfigUnresolved as exc:
        advance(ctx, Event.PATH_REFUSED, error_detail=unresolved(exc)[:480])
        return False
    touch(ctx.services.engine, op.id, ci_closure=closure.to_json())
    refusals = refused_paths(
        paths,
        allowed=policy.allowed_paths(settings, rules),
        unlocking=policy.unlocking_paths(settings),
        ci_includes=closure.patterns,
        protected=rules.paths.protected,
        maintainer=authority.maintainer,
        maintainer_lost=authority.lost,
    )
    if not refusals:
        return True
    advance(ctx, Event.PATH_REFUSED, error_detail=describe(explained(refusals, closure))[:480])
    return False
