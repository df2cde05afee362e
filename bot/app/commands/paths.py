"""The path policy for `/gitops apply` and `/gitops revert`: the same rule as the REST API.

`/gitops apply` checks the paths the MR changes (one compare of the target branch with the MR's
head, bot/gitlab/compare.py); `/gitops revert` checks the paths of the files it would write.
Both check them against GITOPS_ALLOWED_PATHS and the protected paths, the CI configuration's
local includes on the target branch among them (bot/core/path_policy.py). A refusal names every
refused path, each in a code span (bot/app/commands/reply.py keeps it one there), never at the
start of a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bot.app.commands.reply import code_span
from bot.core.path_policy import PathRefusal, describe, refused_paths
from bot.gitlab import MrView, Project
from bot.gitlab.ci_includes import local_includes
from bot.gitlab.compare import TooLargeToCheck, compare_changes


def apply_refusal(project: Project, view: MrView, allowed: Sequence[str]) -> str | None:
    """Why the MR's changed paths may not become a request (None: they may).

    GitLab being unavailable raises (the note is processed again later); a change too large to
    list completely is refused, since a path left out could not be checked.
    """
    if not view.sha:
        return "the merge request has no commits to check"
    try:
        paths = compare_changes(project, view.target_branch, view.sha).paths
    except TooLargeToCheck as exc:
        return f"the paths of this merge request cannot all be checked ({exc})"
    refusals = _refusals(project, paths, view.target_branch, allowed)
    if not refusals:
        return None
    return f"this merge request changes paths the bot may not change: {_named(refusals)}"


def revert_refusal(
    project: Project, paths: Iterable[str], target_branch: str, allowed: Sequence[str]
) -> str | None:
    """Why the files a revert would write may not be written (None: they may)."""
    refusals = _refusals(project, list(paths), target_branch, allowed)
    if not refusals:
        return None
    return f"the revert would write paths the bot may not change: {_named(refusals)}"


def _refusals(
    project: Project, paths: list[str], target_branch: str, allowed: Sequence[str]
) -> list[PathRefusal]:
    if not paths:
        return []
    includes = local_includes(project, target_branch)
    return refused_paths(paths, allowed=allowed, ci_includes=includes)


def _named(refusals: list[PathRefusal]) -> str:
    """The refusals with each path in a code span (inert, however the path is spelt)."""
    return describe([PathRefusal(code_span(r.path), r.reason) for r in refusals])
