"""GitLab's version, read once per GitLab (GET /version) and kept for the process: the calls
whose parameters changed between releases are chosen from it.

A failed read is not kept (the next call reads again) and chooses what works on every release.
"""

from __future__ import annotations

import re
import threading

import gitlab

from bot.gitlab.calls import get_json
from bot.gitlab.errors import GitLabError

_lock = threading.Lock()
_known: dict[str, tuple[int, int]] = {}
_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as "17.11.2-ee"; None when it is not one."""
    found = _VERSION.match(text.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def gitlab_version(gl: gitlab.Gitlab) -> tuple[int, int] | None:
    """The (major, minor) of the GitLab behind `gl`: one GET the first time per GitLab URL
    in this process; None when it cannot be read now."""
    key = str(gl.url)
    with _lock:
        if key in _known:
            return _known[key]
    try:
        data = get_json(gl, "/version", what="read the GitLab version")
    except GitLabError:
        return None
    found = parse(str(data.get("version") or ""))
    if found is not None:
        with _lock:
            _known[key] = found
    return found


def forget() -> None:
    """Forgets every version read (tests that change the GitLab they talk to)."""
    with _lock:
        _known.clear()


def train_join_param(version: tuple[int, int] | None) -> dict[str, bool]:
    """The Merge Trains API's "join once the checks pass" parameter: `when_pipeline_succeeds`
    up to 17.10 (ee/lib/api/merge_trains.rb declares only it and `params.slice`s the rest
    away), `auto_merge` from 17.11 (doc/api/merge_trains.md: when_pipeline_succeeds
    "Deprecated in GitLab 17.11. Use auto_merge instead."); both when the version is unknown
    (each release ignores the one it does not declare)."""
    if version is None:
        return {"auto_merge": True, "when_pipeline_succeeds": True}
    if version >= (17, 11):
        return {"auto_merge": True}
    return {"when_pipeline_succeeds": True}
