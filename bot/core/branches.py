"""Which target branches a change may name: the operator's decision, narrowed by a repository's
policy file, never widened. Pure: no IO.

A branch is allowed when it is protected on GitLab, the operator's GITOPS_TARGET_BRANCHES names it
(unset: it is the project's default branch), and the policy file's `target_branches`, when it has
one, names it too. Entries are branch names or wildcards where `*` stands for any text, `/`
included, as GitLab's protected branch wildcards do (`release/*`). Matching is linear in the
name's length for every pattern: a repository's file cannot make it backtrack.
"""

from __future__ import annotations

from collections.abc import Sequence


def matches(pattern: str, name: str) -> bool:
    """True when branch `name` matches `pattern` (`*` = any text); case-sensitive, as git is."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == name
    first, *middle, last = parts
    if len(name) < len(first) + len(last) or not name.startswith(first):
        return False
    if not name.endswith(last):
        return False
    at, end = len(first), len(name) - len(last)
    for part in middle:  # each literal piece at its first place after the last one: greedy is exact
        found = name.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True


def listed(name: str, entries: Sequence[str]) -> str | None:
    """The first of `entries` that names branch `name`, or None."""
    return next((entry for entry in entries if matches(entry, name)), None)


def refusal(
    name: str,
    *,
    protected: bool,
    default: bool,
    operator: Sequence[str],
    repository: Sequence[str] | None = None,
) -> str | None:
    """Why a change may not target branch `name` (None: it may)."""
    if not protected:
        return (
            f"{name} is not a protected branch: the bot only targets protected branches, whose "
            "CI configuration and policy only Maintainers change"
        )
    if operator:
        if listed(name, operator) is None:
            return f"{name} is not one of the target branches GITOPS_TARGET_BRANCHES allows"
    elif not default:
        return (
            f"{name} is not the project's default branch, the only target GITOPS_TARGET_BRANCHES "
            "allows while it is unset"
        )
    if repository is not None and listed(name, repository) is None:
        return f"{name} is not one of the target branches the project's policy file allows"
    return None
