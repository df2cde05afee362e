"""Merge integrity: what the bot approves and merges is exactly what the approval approved.

The approved change identity (bot/core/identity.py) is fixed before approval is requested. Before
any approver account approves, and again right before the merge call (which is pinned to the
SHA checked here), `check_mr` reads the MR's changes and compares them with the identity:

- the target and source branch must be the approved ones, and the MR not from a fork;
- the head must be the head last verified (the bot's own commit, or MR-first's approved head),
  or the result of a rebase the bot started from it;
- the paths GitLab lists between the target and the head (one compare call) must be the
  approved paths, within the path policy, and -- for a head not verified before -- each path's
  content at the head must hash to the approved content (one read per path);
- none of them may be a file the CI configuration includes at the target branch's head *now*
  (one branch read; the closure recorded on the change when that head is the commit walked
  before, else the CI configuration walked again, bot/app/ci_closure.py): an include added
  after approval that names a file of the change stops it.

Anything else stops the change in HANDLE_FAILED ("changed after approval"), and the outbox takes
the approver accounts' approvals back. A commit's content never changes, so a head verified once
needs only the compare call afterwards.
"""

from __future__ import annotations

import logging

from bot.app import policy
from bot.app.ci_closure import CiClosure, ci_closure, explained, unresolved
from bot.app.steps import StepContext
from bot.app.steps.common import advance
from bot.app.steps.decisions import Verdict
from bot.app.steps.paths import maintainer_authority
from bot.core.events import Event
from bot.core.identity import (
    ChangeIdentity,
    differences,
    identity_from_changes,
    identity_from_request,
)
from bot.core.path_policy import refused_paths
from bot.errors import CannotProceed
from bot.gitlab import MrView, Project
from bot.gitlab.ci_includes import project_info
from bot.gitlab.compare import Comparison, TooLargeToCheck, compare_changes, file_sha256
from bot.gitlab.policy_file import read_branch
from bot.policy.ci_yaml import CiConfigUnresolved
from bot.store.operations import OperationRow, set_identity_once, touch

log = logging.getLogger(__name__)

#: The most characters of reasons kept in error_detail (the status comment shows them).
DETAIL_LIMIT = 480


def _short(sha: str | None) -> str:
    return (sha or "none")[:12]


def approved_identity(ctx: StepContext, project: Project) -> ChangeIdentity:
    """The operation's identity; one in flight from before identities existed gets it now."""
    op = ctx.op
    if op.change_identity is not None:
        return ChangeIdentity.from_json(op.change_identity)
    if op.files:
        identity = identity_from_request(op.project, op.target_branch, op.files)
    elif op.head_sha is not None:
        # a person's MR approved before identities existed: what its pipeline passed on
        identity = read_identity(project, op, op.head_sha)
    else:
        raise CannotProceed("nothing says what was approved (no files, no head)")
    if not set_identity_once(ctx.services.engine, op.id, identity.to_json()):
        raise CannotProceed("the change identity was set meanwhile; the step runs again")
    return identity


def contents_at(project: Project, paths: list[str], sha: str) -> dict[str, str | None]:
    """The SHA-256 of each path's content at `sha` (None: absent), one read per path."""
    return {path: file_sha256(project, path, sha) for path in paths}


def read_identity(project: Project, op: OperationRow, head: str) -> ChangeIdentity:
    """The identity of a person's MR at `head`: its changed paths and their content there,
    compared with the target branch's head commit read now (never its name: a tag of that
    name would shadow it)."""
    target = read_branch(project, op.target_branch).sha
    comparison = compare_changes(project, target, head)
    written = [c.new_path for c in comparison.changes if not c.deleted_file and c.new_path]
    return identity_from_changes(
        op.project,
        op.target_branch,
        comparison.changes,
        contents_at(project, written, head),
        head_sha=head,
        source_branch=op.branch or "",
    )


def check_mr(
    ctx: StepContext,
    project: Project,
    mr: MrView,
    *,
    compared_at: str | None = None,
    final: bool = True,
) -> Verdict:
    """Checks the MR as just read against the approved identity; records a newly verified head.
    `compared_at`: the target's head commit an earlier check of this step compared this verified
    head with; when the target is still there, the comparison of the same two commits (and the
    CI closure at the same commit) is what it was, and is not asked for again.
    `final=False`: no approval or merge follows in this step (a rebase is asked for, or the
    rebased head waits for its pipeline): the MR is compared with the target branch by name and
    the CI closure is left to the final checks, which read the branch's head commit (a tag
    shadowing the name could only make this check refuse, or record a head as verified whose
    content hashes it checked itself; the final checks compare again by commit).

    Calls: none when a branch or the head is already wrong; else one compare and (final) one
    read of the target branch, plus one read per approved path when the head was not verified before
    (after the bot's own rebase), plus the CI configuration's files when the target branch
    moved since they were walked.
    """
    op = ctx.op
    identity = approved_identity(ctx, project)
    head = mr.sha or ""
    reasons: list[str] = []
    if mr.source_project_id is not None and mr.source_project_id != mr.target_project_id:
        reasons.append("the merge request now comes from a fork")
    if op.branch and mr.source_branch and mr.source_branch != op.branch:
        reasons.append(f"the source branch is now {mr.source_branch}, not {op.branch}")
    if mr.target_branch != identity.target_branch:
        reasons.append(f"the target branch is now {mr.target_branch}, not {identity.target_branch}")
    expected = op.verified_sha or identity.head_sha
    rebased_from = op.progress.get("rebase_from")
    ours = expected is not None and rebased_from == expected
    if not head:
        reasons.append("GitLab did not say the merge request's head")
    elif expected is not None and head != expected and not ours:
        reasons.append(
            f"new commits were pushed to {mr.source_branch or 'the source branch'} "
            f"(head {_short(head)}, approved {_short(expected)})"
        )
    if reasons:
        return Verdict(head, tuple(reasons))
    # the final checks compare by commit (no tag shadows it), the others by the branch's name
    target = read_branch(project, identity.target_branch).sha if final else identity.target_branch
    if compared_at == target and head == op.verified_sha:
        return Verdict(head, (), target)  # two commits compare alike every time
    try:
        comparison = compare_changes(project, target, head)
    except TooLargeToCheck as exc:
        return Verdict(head, (f"the change cannot be checked: {exc}",))
    verified_before = head == op.verified_sha
    contents = None if verified_before else contents_at(project, _approved_paths(identity), head)
    reasons = differences(
        identity, target_branch=mr.target_branch, changes=comparison.changes, contents=contents
    )
    if final:
        reasons += _policy(ctx, project, comparison, identity, target)
    if not reasons and not verified_before:
        touch(ctx.services.engine, op.id, verified_sha=head)
        log.info(
            "head verified against the approved change",
            extra={"operation_id": op.id, "head": head, "rebased": ours},
        )
    return Verdict(head, tuple(reasons), target if final else None)


def _approved_paths(identity: ChangeIdentity) -> list[str]:
    return [f.path for f in identity.files]


def _policy(
    ctx: StepContext,
    project: Project,
    comparison: Comparison,
    identity: ChangeIdentity,
    target: str,
) -> list[str]:
    """The path policy again, on what the MR changes now (protected and allowed paths, with the
    policy recorded on the change, and the CI configuration's closure at the target branch's
    head now). A Maintainer's authority holds only when the approved head is the one that
    Maintainer applied at (the comparison above holds the MR to the approved content, also
    after the bot's own rebase)."""
    rules = policy.of(ctx.op)
    settings = ctx.services.settings
    authority = maintainer_authority(ctx.op, identity.head_sha)
    try:
        closure = closure_now(ctx, project, target)
    except CiConfigUnresolved as exc:
        return [unresolved(exc)]
    refusals = refused_paths(
        comparison.paths,
        allowed=policy.allowed_paths(settings, rules),
        unlocking=policy.unlocking_paths(settings),
        ci_includes=closure.patterns,
        protected=rules.paths.protected,
        maintainer=authority.maintainer,
        maintainer_lost=authority.lost,
    )
    return [f"{r.path} {r.reason}" for r in explained(refusals, closure)]


def closure_now(ctx: StepContext, project: Project, head: str) -> CiClosure:
    """The CI configuration's closure at the target branch's head commit `head` (read just
    now): the one recorded on the change when it walked that commit (and the setting is the
    same), else walked again and recorded: the walk's reads only when the branch moved."""
    recorded = CiClosure.from_json(ctx.op.ci_closure)
    if (
        recorded is not None
        and recorded.reusable
        and recorded.at == head
        and recorded.config == (project_info(project).ci_config_path or "")
    ):
        return recorded
    closure = ci_closure(project, head)
    touch(ctx.services.engine, ctx.op.id, ci_closure=closure.to_json())
    log.info(
        "CI configuration walked again before the merge",
        extra={"operation_id": ctx.op.id, "head": head, "was": recorded and recorded.at},
    )
    return closure


def stop_changed(ctx: StepContext, verdict: Verdict) -> bool:
    """Stops the change: HANDLE_FAILED "changed after approval"; the outbox unapproves."""
    detail = "changed after approval: " + "; ".join(verdict.reasons)
    if len(detail) > DETAIL_LIMIT:
        detail = detail[: DETAIL_LIMIT - 1] + "…"
    log.warning(detail, extra={"operation_id": ctx.op.id, "head": verdict.head})
    return advance(ctx, Event.CHANGED_AFTER_APPROVAL, error_detail=detail)
