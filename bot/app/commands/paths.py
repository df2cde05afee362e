"""The path policy for `/gitops apply` and `/gitops revert`: the same rule as the REST API.

`/gitops apply` checks the paths the MR changes (one compare of the target branch with the MR's
head, bot/gitlab/compare.py); `/gitops revert` checks the paths of the files it would write.
Both check them against the allowed paths (GITOPS_ALLOWED_PATHS narrowed by the policy file's)
and the protected paths, every file the CI configuration includes on the target branch
(bot/app/ci_closure.py; one it cannot walk to the end refuses the command) and the policy
file's own among them (bot/core/path_policy.py); only GITOPS_ALLOWED_PATHS (`unlocking`)
explicitly allows a protected path; a Maintainer may change the policy file's. A Maintainer's
`/gitops apply` records the head it was given at: that Maintainer's authority covers it alone
(bot/app/steps/paths.py). A refusal names every refused path, each in a code span
(bot/app/commands/reply.py keeps it one there), never at the start of a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.app import policy
from bot.app.ci_closure import ci_closure, explained, unresolved
from bot.app.commands.reply import code_span
from bot.core.path_policy import PathRefusal, describe, refused_paths
from bot.gitlab import MrView, Project
from bot.gitlab.compare import TooLargeToCheck, compare_changes
from bot.policy.ci_yaml import CiConfigUnresolved
from bot.services import Services


@dataclass(frozen=True, slots=True)
class Start:
    """What a change a command starts follows: the policy read at the target branch's head,
    and whether a Maintainer asked for it."""

    recorded: policy.Recorded
    maintainer: bool = False

    def paths(self, services: Services) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(allowed, protected) paths: GITOPS_ALLOWED_PATHS narrowed by the policy file's."""
        rules = self.recorded.policy
        return policy.allowed_paths(services.settings, rules), tuple(rules.paths.protected)

    def base(self, branch: str) -> str:
        """The commit a change started now starts from: the target's head read with the policy
        (the branch's name only for services that read no GitLab)."""
        return self.recorded.sha or branch

    def recorded_fields(self) -> dict[str, Any]:
        """The NewRequest fields recording it on the change."""
        return {
            "policy_sha": self.recorded.sha,
            "policy": self.recorded.as_json(),
            "maintainer_request": self.maintainer,
        }


def apply_refusal(
    project: Project,
    view: MrView,
    base: str,
    allowed: Sequence[str],
    protected: Sequence[str] = (),
    *,
    maintainer: bool = False,
    unlocking: Sequence[str] | None = None,
) -> str | None:
    """Why the MR's changed paths may not become a request (None: they may). `base` is the
    target branch's head commit the change would start from (its CI configuration is walked
    there, and the MR compared with it: a tag named like the branch shadows the name).

    GitLab being unavailable raises (the note is processed again later); a change too large to
    list completely is refused, since a path left out could not be checked.
    """
    if not view.sha:
        return "the merge request has no commits to check"
    try:
        paths = compare_changes(project, base, view.sha).paths
    except TooLargeToCheck as exc:
        return f"the paths of this merge request cannot all be checked ({exc})"
    try:
        refusals = _refusals(project, paths, base, allowed, protected, maintainer, unlocking)
    except CiConfigUnresolved as exc:
        return unresolved(exc)
    if not refusals:
        return None
    return f"this merge request changes paths the bot may not change: {_named(refusals)}"


def revert_refusal(
    project: Project,
    paths: Iterable[str],
    base: str,
    allowed: Sequence[str],
    protected: Sequence[str] = (),
    *,
    maintainer: bool = False,
    unlocking: Sequence[str] | None = None,
) -> str | None:
    """Why the files a revert would write may not be written (None: they may); `base` as for
    apply_refusal."""
    try:
        refusals = _refusals(project, list(paths), base, allowed, protected, maintainer, unlocking)
    except CiConfigUnresolved as exc:
        return unresolved(exc)
    if not refusals:
        return None
    return f"the revert would write paths the bot may not change: {_named(refusals)}"


def _refusals(
    project: Project,
    paths: list[str],
    base: str,
    allowed: Sequence[str],
    protected: Sequence[str],
    maintainer: bool,
    unlocking: Sequence[str] | None,
) -> list[PathRefusal]:
    if not paths:
        return []
    closure = ci_closure(project, base)
    refusals = refused_paths(
        paths,
        allowed=allowed,
        ci_includes=closure.patterns,
        protected=protected,
        maintainer=maintainer,
        unlocking=unlocking,
    )
    return explained(refusals, closure)


def _named(refusals: list[PathRefusal]) -> str:
    """The refusals with each path in a code span (inert, however the path is spelt)."""
    return describe([PathRefusal(code_span(r.path), r.reason) for r in refusals])
