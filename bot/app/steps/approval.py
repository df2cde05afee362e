"""Approval phase: submit to the approval system (idempotent on the operation id), and read
its status when the approvers take long."""

from __future__ import annotations

from datetime import timedelta

from bot.app.checks.preview import preview_summary
from bot.app.events.approval import on_approval
from bot.app.steps import StepContext
from bot.app.steps.checks import checked_preview
from bot.app.steps.common import advance
from bot.app.steps.integrity import approved_identity
from bot.app.steps.paths import check_paths
from bot.app.steps.waits import drive_in
from bot.approval import ApprovalCallback, ApprovalRequest, Decision
from bot.core.events import Event
from bot.core.states import Flow, Step
from bot.render.change_text import approval_description, approval_line


def submit_approval(ctx: StepContext) -> bool:
    """Sends the approval request carrying the change identity (what an approval approves);
    records the approval id as APPROVAL_SUBMITTED. Approve-first checks the paths first."""
    op, settings = ctx.op, ctx.services.settings
    project = ctx.clients.author.project(op.gitlab_project)
    if op.flow is Flow.APPROVE_FIRST and not check_paths(
        ctx, project, [f["path"] for f in op.files]
    ):
        return True  # refused: CREATE_FAILED, nobody is asked to approve
    identity = approved_identity(ctx, project)
    preview = checked_preview(ctx, project, identity)
    if preview is None:
        return True  # a file fails its validators: CREATE_FAILED, nobody is asked to approve
    summary = [identity.summary(), *preview_summary(preview, op.mr_url)]
    request = ApprovalRequest(
        operation_id=op.id,
        title=approval_line(op.title),
        description=approval_description(summary, op.description),
        applicant=approval_line(op.requested_by),
        callback_url=f"{settings.public_url}/webhooks/approval",
        mr_iid=op.mr_iid if op.flow is Flow.MR_FIRST else None,
        project=op.project,
        change=identity.ext(),
    )
    approval_id = ctx.clients.approval.submit(request)
    deadline = ctx.now + timedelta(seconds=settings.step_timeout)
    return advance(
        ctx,
        Event.APPROVAL_SUBMITTED,
        approval_id=approval_id,
        deadline_at=deadline,
        preview=preview,
    )


def await_approval(ctx: StepContext) -> bool:
    """The approvers are taking long: ask the approval system where the request stands."""
    op = ctx.op
    if op.approval_id is None:
        return False
    decision = ctx.clients.approval.status(op.approval_id)
    if decision is Decision.PENDING:
        if op.step is not Step.APPROVAL_PENDING and advance(ctx, Event.APPROVAL_TIMED_OUT):
            return False  # shown as pending; the next read follows the new deadline below
        drive_in(ctx.services, op, ctx.services.settings.step_timeout, ctx.now, pinned=False)
        return False
    callback = ApprovalCallback(
        request_id=f"status:{op.approval_id}",
        operation_id=op.id,
        approval_id=op.approval_id,
        decision=decision,
        mr_iid=op.mr_iid if op.flow is Flow.MR_FIRST else None,
    )
    return on_approval(ctx.services.engine, callback).moved is not None
