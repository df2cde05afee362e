"""Which paths a change may touch, for every way in (REST API, `/gitops apply`, `/gitops revert`).

Pure: no IO. A path must be safe (`bot/paths.py`), under `GITOPS_ALLOWED_PATHS` when that is set,
and not protected unless explicitly allowed. Protected paths are what decides how the project's
CI runs and who must review it: `.gitlab-ci.yml`, `.gitlab/`, the CODEOWNERS files,
`.gitattributes`, the bot's own policy file, and every file the CI configuration includes locally
(read from the target branch by `bot/gitlab/ci_includes.py`). A change to them is a change to what
runs with the project's secrets.

"Explicitly allowed" means an entry of `GITOPS_ALLOWED_PATHS` that names the protected path itself
or lies inside a protected directory (`.gitlab/agents/` allows `.gitlab/agents/a/config.yaml`); a
broad entry such as `config/` or an empty list never allows a protected path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.core.paths import UnsafePath, normalise_path

#: Protected files and directories (a trailing `/` is a directory), compared case-insensitively.
PROTECTED_PATHS: tuple[str, ...] = (
    ".gitlab-ci.yml",
    ".gitlab/",
    "CODEOWNERS",
    "docs/CODEOWNERS",
    ".gitattributes",
    ".gitops/bot.yml",
)


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


def protected_by(path: str) -> str | None:
    """The protected entry `path` falls under (static list only), or None."""
    segments = _fold(_segments(path))
    for entry in PROTECTED_PATHS:
        wanted = _fold(_segments(entry))
        if entry.endswith("/"):
            if len(segments) > len(wanted) and segments[: len(wanted)] == wanted:
                return entry
        elif segments == wanted:
            return entry
    return None


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """GitLab's `include:local` wildcards: `*` within a segment, `**` across segments; a CI
    variable (`$NAME`, `${NAME}`) may be anything within its segment."""
    pattern = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "*", pattern.strip().lstrip("/"))
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
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.IGNORECASE)


def included_by(path: str, ci_includes: Iterable[str]) -> str | None:
    """The CI `include:local` pattern that names `path`, or None."""
    plain = "/".join(_segments(path))
    for pattern in ci_includes:
        if _glob_regex(pattern).fullmatch(plain):
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
) -> list[PathRefusal]:
    """Every path of a change that the policy refuses, each with its reason (empty: all fine)."""
    includes = tuple(ci_includes)
    refusals: list[PathRefusal] = []
    for path in paths:
        try:
            normal = normalise_path(path)
        except UnsafePath as exc:
            refusals.append(PathRefusal(path, exc.reason, "unsafe"))
            continue
        zone = protected_by(normal)
        include = included_by(normal, includes) if zone is None else None
        if (zone is not None or include is not None) and not any(
            _explicitly_allows(entry, normal, zone) for entry in allowed
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
    return refusals


def describe(refusals: Sequence[PathRefusal], limit: int = 10) -> str:
    """The refusals as one line for a reply, an error detail or an API answer."""
    shown = "; ".join(str(r) for r in refusals[:limit])
    more = len(refusals) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
