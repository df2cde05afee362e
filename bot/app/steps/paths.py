"""The path policy where the bot writes the change itself: checked against the CI configuration
of the target branch before anyone is asked to approve and before anything is committed."""

from __future__ import annotations

from collections.abc import Sequence

from bot.app.steps import StepContext
from bot.app.steps.common import advance
from bot.core.events import Event
from bot.core.path_policy import describe, refused_paths
from bot.gitlab import Project
from bot.gitlab.ci_includes import local_includes


def check_paths(ctx: StepContext, project: Project, paths: Sequence[str]) -> bool:
    """True when the policy allows every path; else the change stops (PATH_REFUSED) naming them.

    The static rules were checked when the request came in; this adds the files the project's
    CI configuration includes locally, read at the target branch (one read, more when nested).
    """
    op = ctx.op
    refusals = refused_paths(
        paths,
        allowed=ctx.services.settings.allowed_paths,
        ci_includes=local_includes(project, op.target_branch),
    )
    if not refusals:
        return True
    advance(ctx, Event.PATH_REFUSED, error_detail=describe(refusals)[:480])
    return False
