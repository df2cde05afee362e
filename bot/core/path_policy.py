"""Which paths a change may touch, for every way in (REST API, `/gitops apply`, `/gitops revert`).

Pure: no IO. A path must be safe (`bot/paths.py`), under the allowed paths, and not protected
unless explicitly allowed. Protected paths are what decides how the project's CI runs and who
must review it: `.gitlab-ci.yml`, `.gitlab/`, the CODEOWNERS files, `.gitattributes`, the bot's
own policy file, and every file the CI configuration includes locally (read from the target
branch by `bot/gitlab/ci_includes.py`). A change to them is a change to what runs with the
project's secrets.

"Explicitly allowed" means an entry of the operator's `GITOPS_ALLOWED_PATHS` that names the
protected path itself or lies inside a protected directory (`.gitlab/agents/` allows
`.gitlab/agents/a/config.yaml`); a broad entry such as `config/` or an empty list never allows a
protected path.

**A repository's policy file tightens, never loosens** what the operator set:

- its `paths.allowed` narrows GITOPS_ALLOWED_PATHS (`narrowed`): a path must be allowed by
  both; an empty or missing list adds no restriction of its own. It can never allow a built-in
  protected path: an entry that would (`unlocks`) makes the file invalid (bot/app/policy.py
  refuses it with its line and column), and one recorded before that rule is dropped here;
  only the operator's entries (`unlocking`) explicitly allow a protected path or a CI include.
- its `paths.protected` adds protected paths: on top of every other rule, changing one needs a
  Maintainer (`/gitops apply` by one); nothing in the allowed paths lifts that.

The policy file itself is the Maintainer's: a change a Maintainer requested may change it,
whatever the allowed paths say (the operator's rule, not the file's); anyone else needs the
operator to name it. The Maintainer's authority covers what that Maintainer saw (the caller
decides: bot/app/steps/paths.py); a change it does not cover is refused with `maintainer_lost`
as the reason on every path that needed it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from bot.core.paths import UnsafePath, normalise_path

#: Protected files and directories (a trailing `/` is a directory), compared case-insensitively.
PROTECTED_PATHS: tuple[str, ...] = (
    ".gitlab-ci.yml",
    ".gitlab/",
    "CODEOWNERS",
    "docs/CODEOWNERS",
    ".gitattributes",
    ".gitops/",
)
#: The protected entries a Maintainer may change (besides a policy file's `paths.protected`):
#: the bot's own directory, its policy file and anything kept beside it.
MAINTAINER_PATHS: tuple[str, ...] = (".gitops/",)
#: The allowed paths when GITOPS_ALLOWED_PATHS and a policy file share none: a prefix no safe
#: path lies under (a `..` segment), which names why in the refusal.
NOTHING_ALLOWED = "(none: GITOPS_ALLOWED_PATHS and the policy file share no path)/.."


@dataclass(frozen=True, slots=True)
class PathRefusal:
    """One path a change may not touch, and why (shown on the MR and in the API's 422)."""

    path: str
    reason: str
    #: "unsafe" (not a safe relative path), "protected", or "outside" the allowed paths
    kind: str = "protected"

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _segments(path: str) -> list[str]:
    return [s for s in path.strip().split("/") if s not in ("", ".")]


def _fold(segments: Sequence[str]) -> list[str]:
    return [s.casefold() for s in segments]


def protected_by(path: str, entries: Iterable[str] = PROTECTED_PATHS) -> str | None:
    """The protected entry `path` falls under (the static list by default), or None."""
    segments = _fold(_segments(path))
    for entry in entries:
        wanted = _fold(_segments(entry))
        if entry.endswith("/"):
            if len(segments) > len(wanted) and segments[: len(wanted)] == wanted:
                return entry
        elif segments == wanted:
            return entry
    return None


def unlocks(entry: str) -> str | None:
    """The built-in protected entry that allowed-paths `entry` would explicitly allow a change
    to (it names a protected file, or a protected directory or something inside it), or None.
    A policy file's `paths.allowed` may hold no such entry; GITOPS_ALLOWED_PATHS may."""
    segments = _fold(_segments(entry))
    if not segments:
        return None
    for zone in PROTECTED_PATHS:
        wanted = _fold(_segments(zone))
        if zone.endswith("/") and segments[: len(wanted)] == wanted:
            return zone
        if segments == wanted:
            return zone
    return None


def _prefix_segments(prefix: str) -> list[str]:
    """A prefix's segments as bot/core/paths.py matches them (NFC, no empty or `.` ones)."""
    return [s for s in unicodedata.normalize("NFC", prefix).split("/") if s not in ("", ".")]


def _meet(a: str, b: str) -> str | None:
    """The prefix whose paths lie under both `a` and `b` (None: no path lies under both).
    Prefixes nest or are apart: the deeper one, and for the same segments the directory form
    (a trailing `/`, which needs something below it)."""
    sa, sb = _prefix_segments(a), _prefix_segments(b)
    shared = min(len(sa), len(sb))
    if sa[:shared] != sb[:shared]:
        return None
    if len(sa) != len(sb):
        return a if len(sa) > len(sb) else b
    return a if a.endswith("/") else b


def narrowed(operator: Sequence[str], repository: Sequence[str] | None) -> tuple[str, ...]:
    """The allowed paths of a change: the operator's (GITOPS_ALLOWED_PATHS; empty: any safe path)
    narrowed by a repository's `paths.allowed` (None or empty: no restriction of its own). A
    path lies under the result exactly when it lies under both; when they share no path the
    result is NOTHING_ALLOWED, never the empty "any path". A repository entry that `unlocks` a
    built-in protected path is dropped (a file holding one is refused when it is read; this
    holds for a policy recorded before that rule)."""
    ours = tuple(operator)
    if not repository:
        return ours
    theirs = [entry for entry in repository if unlocks(entry) is None]
    if not ours:
        return tuple(dict.fromkeys(theirs)) or (NOTHING_ALLOWED,)
    meets = [m for a in ours for b in theirs if (m := _meet(a, b)) is not None]
    return tuple(dict.fromkeys(meets)) or (NOTHING_ALLOWED,)


_GLOB_OPTIONS = re2.Options()
_GLOB_OPTIONS.case_sensitive = False
_GLOB_OPTIONS.log_errors = False
_CI_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> Any:
    """GitLab's `include:local` wildcards: `*` within a segment, `**` across segments; a CI
    variable (`$NAME`, `${NAME}`) may be anything within its segment; case-insensitive. On RE2,
    whose time is linear in the path: the patterns are the repository's (validator globs, CI
    includes), and `**a**a**a**a**a**b` on Python's `re` backtracks for minutes on a long path.
    None when RE2 cannot compile it (a glob of megabytes)."""
    pattern = _CI_VARIABLE.sub("*", pattern.strip().lstrip("/"))
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        else:
            out.append(re2.escape(pattern[i]))
            i += 1
    try:
        return re2.compile("".join(out), _GLOB_OPTIONS)
    except re2.error:
        return None


def included_by(path: str, ci_includes: Iterable[str]) -> str | None:
    """The CI `include:local` pattern that names `path`, or None. A pattern too large to
    compile names every path (fail closed: the file counts as included)."""
    plain = "/".join(_segments(path))
    for pattern in ci_includes:
        regex = _glob_regex(pattern)
        if regex is None or regex.fullmatch(plain):
            return pattern
    return None


def _explicitly_allows(entry: str, path: str, zone: str | None) -> bool:
    """Whether allowed-paths `entry` names protected `path` itself (or lies inside its zone)."""
    entry_segments = _fold(_segments(entry))
    path_segments = _fold(_segments(path))
    if not entry_segments:
        return False
    if entry_segments == path_segments:
        return True
    if zone is None or not zone.endswith("/"):
        return False  # a protected file (or a CI include) must be named exactly
    zone_segments = _fold(_segments(zone))
    inside_zone = entry_segments[: len(zone_segments)] == zone_segments
    covers = (
        len(path_segments) > len(entry_segments)
        and path_segments[: len(entry_segments)] == entry_segments
    )
    return inside_zone and covers


def refused_paths(
    paths: Iterable[str],
    *,
    allowed: Sequence[str] = (),
    ci_includes: Iterable[str] = (),
    protected: Sequence[str] = (),
    maintainer: bool = False,
    unlocking: Sequence[str] | None = None,
    maintainer_lost: str | None = None,
) -> list[PathRefusal]:
    """Every path of a change that the policy refuses, each with its reason (empty: all fine).

    `allowed` are the change's allowed paths (`narrowed`); `unlocking` the operator's entries,
    the only ones that explicitly allow a protected path (None: `allowed`, which holds no
    repository entry that could); `protected` adds a policy file's protected paths;
    `maintainer` says a Maintainer's authority covers the change, who may change those and the
    policy file itself; `maintainer_lost` says why it does not, for a change a Maintainer
    requested (shown on each path that needed it).
    """
    unlock = tuple(allowed if unlocking is None else unlocking)
    includes = tuple(ci_includes)
    refusals: list[PathRefusal] = []
    for path in paths:
        try:
            normal = normalise_path(path)
        except UnsafePath as exc:
            refusals.append(PathRefusal(path, exc.reason, "unsafe"))
            continue
        own = protected_by(normal, MAINTAINER_PATHS)
        if own is not None and maintainer:
            continue  # the policy file: a Maintainer's, whatever the allowed paths say
        if own is not None and not any(_explicitly_allows(e, normal, own) for e in unlock):
            refusals.append(PathRefusal(normal, _needs_maintainer(own, maintainer_lost)))
            continue
        zone = protected_by(normal) if own is None else None
        include = included_by(normal, includes) if zone is None and own is None else None
        if (zone is not None or include is not None) and not any(
            _explicitly_allows(entry, normal, zone) for entry in unlock
        ):
            what = (
                f"is a protected path ({zone})"
                if zone is not None
                else f"is included by the CI configuration ({include})"
            )
            hint = "; list it in GITOPS_ALLOWED_PATHS to allow changes to it"
            refusals.append(PathRefusal(normal, what + hint, "protected"))
            continue
        try:
            normalise_path(normal, allowed)
        except UnsafePath as exc:
            refusals.append(PathRefusal(normal, exc.reason, "outside"))
            continue
        theirs = protected_by(normal, protected) if own is None else None
        if theirs is not None and not maintainer:
            refusals.append(PathRefusal(normal, _needs_maintainer(theirs, maintainer_lost)))
    return refusals


def _needs_maintainer(zone: str, lost: str | None) -> str:
    """Why a Maintainer-only path is refused: it needs one, or the Maintainer's authority does
    not cover this change (`lost` says why)."""
    if lost is not None:
        return f"is a protected path ({zone}); {lost}"
    return f"is a protected path ({zone}); changing it needs Maintainer"


def describe(refusals: Sequence[PathRefusal], limit: int = 10) -> str:
    """The refusals as one line for a reply, an error detail or an API answer."""
    shown = "; ".join(str(r) for r in refusals[:limit])
    more = len(refusals) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
