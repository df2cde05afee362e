"""What the project's CI configuration protects at one commit (`CiClosure`): the paths a change
may not touch (bot/core/path_policy.py `ci_includes`), each with the include that names it.

`ci_closure` walks the configuration (bot/app/ci_walk.py: every include form GitLab has that
lands in this repository, to the end, under GitLab's own budget); a walk that cannot finish
raises CiConfigUnresolved and the caller refuses the change with `unresolved` (fail closed).
The closure is recorded on the change (`operations.ci_closure`, `to_json`) so that the check
before the merge reuses it while the target branch stays at the commit walked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.app.ci_walk import Walk
from bot.core.path_policy import PathRefusal, included_by
from bot.gitlab import Project
from bot.gitlab.ci_includes import project_info
from bot.policy.ci_yaml import CiConfigUnresolved


@dataclass(frozen=True)
class CiClosure:
    """What the CI configuration at one commit protects: each pattern with the include that
    named it (`origins[i]` for `patterns[i]`)."""

    #: the commit walked (the branch's name when the change recorded no commit)
    at: str
    #: the `ci_config_path` walked from ("" for `.gitlab-ci.yml`)
    config: str
    patterns: tuple[str, ...]
    origins: tuple[str, ...]
    #: False when another project was read: its files may change without this commit changing
    reusable: bool = True

    def origin(self, pattern: str) -> str:
        """The include that named `pattern`."""
        return self.origins[self.patterns.index(pattern)]

    def to_json(self) -> dict[str, Any]:
        """What `operations.ci_closure` records."""
        return {
            "at": self.at,
            "config": self.config,
            "patterns": list(self.patterns),
            "origins": list(self.origins),
            "reusable": self.reusable,
        }

    @classmethod
    def from_json(cls, data: Any) -> CiClosure | None:
        """A recorded closure (None: none, or not one this version wrote)."""
        if not isinstance(data, dict):
            return None
        try:
            patterns = tuple(str(p) for p in data["patterns"])
            origins = tuple(str(o) for o in data["origins"])
            closure = cls(
                str(data["at"]), str(data["config"]), patterns, origins, data["reusable"] is True
            )
        except (KeyError, TypeError):
            return None
        return closure if len(patterns) == len(origins) else None


def ci_closure(project: Project, at: str) -> CiClosure:
    """The CI configuration's closure at commit `at` (one read per file, one per 100 tree
    entries listed, the project's settings at most once a minute)."""
    info = project_info(project)
    patterns, reusable = Walk(project, info, at).run()
    config = info.ci_config_path or ""
    return CiClosure(at, config, tuple(patterns), tuple(patterns.values()), reusable)


def unresolved(exc: CiConfigUnresolved) -> str:
    """Why a change is refused when its CI configuration could not be walked to the end."""
    return f"the CI configuration cannot be checked, so no path can be: {exc.reason}"


def explained(refusals: list[PathRefusal], closure: CiClosure) -> list[PathRefusal]:
    """The refusals, each CI include's with the include that named it."""
    out: list[PathRefusal] = []
    for refusal in refusals:
        pattern = None
        if "included by the CI configuration" in refusal.reason:
            pattern = included_by(refusal.path, closure.patterns)
        if pattern is not None:
            refusal = PathRefusal(
                refusal.path,
                f"{refusal.reason}; named by {closure.origin(pattern)}",
                refusal.kind,
            )
        out.append(refusal)
    return out
