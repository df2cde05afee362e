"""Which projects the bot manages: GITOPS_PROJECTS as an allow-list, when it is set.

Pure: no IO. An entry is a project path (compared case-insensitively, as GitLab resolves paths)
or a numeric project id. An empty list means the allow-list is off: every project is managed,
as before the setting existed.
"""

from __future__ import annotations

from collections.abc import Iterable


def _fold(value: str) -> str:
    return value.strip().strip("/").casefold()


def is_managed(
    projects: Iterable[str], *, project_id: int | None = None, path: str | None = None
) -> bool:
    """Whether a project (by numeric id, path, or both) is on the allow-list; True when the list
    is empty. A project matches when its id or its path is listed."""
    entries = {_fold(entry) for entry in projects if _fold(entry)}
    if not entries:
        return True
    if project_id is not None and str(int(project_id)) in entries:
        return True
    return path is not None and _fold(path) in entries
