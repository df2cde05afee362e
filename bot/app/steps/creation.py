"""Creation phase: the bot's branch, commit and MR (or a person's MR adopted), then its checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.app.checks import changed_files
from bot.app.steps import StepContext
from bot.app.steps.checks import preview_at
from bot.app.steps.common import advance
from bot.app.steps.decide import decide_pipeline, head_pipeline
from bot.app.steps.decisions import Advance, Poll
from bot.app.steps.integrity import approved_identity, read_identity
from bot.app.steps.paths import check_paths
from bot.app.steps.perform import perform
from bot.app.steps.waits import continues_wait, new_wait, newly_covered
from bot.core.events import Event
from bot.core.labels import label_for
from bot.core.states import BindingState, Flow
from bot.errors import CannotProceed
from bot.gitlab import create_change, head_pipeline_parents, read_mr
from bot.gitlab.compare import TooLargeToCheck
from bot.gitlab.policy_file import read_branch
from bot.render.change_text import mr_description
from bot.store.operations import preview_of, touch


def create_mr(ctx: StepContext) -> bool:
    """Makes (or finds again) the change's MR and records it: MR_OPENED."""
    op = ctx.op
    project = ctx.clients.author.project(op.gitlab_project)
    if op.mr_iid is not None and not op.mr_opened_by_bot:
        mr = read_mr(project, op.mr_iid)  # `/gitops apply`: the MR is a person's
        if mr.state != "opened":
            raise CannotProceed(f"the MR is {mr.state}, not open")
        return advance(
            ctx,
            Event.MR_OPENED,
            project_id=mr.target_project_id or mr.project_id,
            head_sha=mr.sha,
            mr_url=mr.web_url,
            branch=mr.source_branch,
        )
    if op.flow is Flow.MR_FIRST and not check_paths(ctx, project, [f["path"] for f in op.files]):
        return True  # refused before anything is committed: the MR pipeline never runs it
    fresh = "create" not in op.progress
    if fresh:  # any later run (a crash, a retry) knows an earlier one may have written something
        touch(ctx.services.engine, op.id, progress={**op.progress, "create": True})
    description = mr_description(op.description, op.requested_by, op.id)  # inert: quoted
    label = label_for(BindingState.MR_CREATING)  # the MR is opened with its phase's label
    # the commit the change started from (its policy, schemas and CI configuration were read
    # there); one in flight from before it was recorded starts from the branch's head now
    base = op.policy_sha or read_branch(project, op.target_branch).sha
    preview = preview_of(ctx.services.engine, op.id) if op.policy_sha else None
    if preview is None and op.policy_sha:  # MR first: previewed now, at the same commit
        preview = preview_at(project, changed_files(op.files), base)
    ref = create_change(
        project,
        operation_id=op.id,
        target_branch=op.target_branch,
        start_sha=base,
        known=_known(preview),
        files=op.files,
        title=op.title,
        description=description,
        labels=[label],
        fresh=fresh,
    )
    project_id, head = ref.project_id, ref.head_sha
    if project_id is None or head is None:  # an older GitLab's answer without them
        mr = read_mr(project, ref.mr_iid)
        project_id, head = mr.target_project_id or mr.project_id, mr.sha
    opened: dict[str, Any] = {"label_set": label} if ref.created else {}  # it came labelled
    if preview is not None:
        opened["preview"] = preview
    return advance(
        ctx,
        Event.MR_OPENED,
        **opened,
        mr_iid=ref.mr_iid,
        mr_url=ref.mr_url,
        mr_opened_by_bot=True,
        branch=ref.branch,
        head_sha=head,
        project_id=project_id,
        # the commit this run wrote holds exactly the request's files: its head is verified
        verified_sha=ref.commit_sha if ref.wrote_commit and head == ref.commit_sha else None,
    )


def _known(preview: dict[str, Any] | None) -> dict[str, bool]:
    """Which of the change's paths exist at the commit it starts from, as its preview read them
    there (`create`: absent, `update`: present; the others were not read)."""
    files = (preview or {}).get("files") or []
    return {
        str(f["path"]): f["action"] == "update"
        for f in files
        if isinstance(f, dict) and f.get("action") in ("create", "update")
    }


def poll_pipeline(ctx: StepContext) -> bool:
    """Reads the MR's head pipeline: passed, failed, or poll again (tiered) until timed out."""
    op = ctx.op
    assert op.mr_iid is not None
    if new_wait(op):  # the first look waits a tier: a webhook in time means 0 poll calls
        return perform(ctx, Poll("pipeline"))
    if newly_covered(op) is not None:  # webhooks come for this MR now: polls are the fallback
        return perform(ctx, Poll("pipeline")) if continues_wait(ctx) else False
    project = ctx.clients.author.project(op.gitlab_project)
    mr = read_mr(project, op.mr_iid)
    return perform(
        ctx, decide_pipeline(mr, seen=head_pipeline(mr, head_pipeline_parents(project, mr)))
    )


def start_handling(ctx: StepContext) -> bool:
    """Approve-first: the checks passed, so approve and merge."""
    return perform(ctx, Advance(Event.HANDLE_START))


def request_approval(ctx: StepContext) -> bool:
    """MR-first: the checks passed, so fix what the approval approves (the change identity, with
    the head the pipeline passed on) and ask for it (ext.mrId carries the MR)."""
    op = ctx.op
    project = ctx.clients.author.project(op.gitlab_project)
    head = op.head_sha
    if head is None:
        raise CannotProceed("the merge request's head is not known")
    if op.mr_opened_by_bot:
        # the bot wrote the change: the request's files are what is approved, at its head
        identity = approved_identity(ctx, project)
        fixed = replace(identity, head_sha=op.verified_sha or head, source_branch=op.branch)
        return advance(ctx, Event.REQUEST_APPROVAL, change_identity=fixed.to_json())
    # a person's MR: what it changes at the head its pipeline passed on, within the path policy
    try:
        identity = read_identity(project, op, head)
    except TooLargeToCheck as exc:
        raise CannotProceed(f"the merge request cannot be checked: {exc}") from None
    if not identity.files:
        raise CannotProceed("the merge request changes no file")
    if not check_paths(ctx, project, [f.path for f in identity.files]):
        return True
    return advance(
        ctx, Event.REQUEST_APPROVAL, change_identity=identity.to_json(), verified_sha=head
    )
