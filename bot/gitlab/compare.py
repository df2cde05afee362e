"""What a merge request changes, read live from the repository: the paths between the target
branch and a head commit (one compare call), and the content hash of a file at a commit.

The compare API works on the commits themselves (`from...to`, the merge base as GitLab merges),
so unlike the MR's cached diff it cannot lag behind a push. A commit's content never changes,
so a content hash read at a SHA is valid for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.core.identity import ChangedPath
from bot.gitlab.calls import get_json, get_raw, head_headers
from bot.gitlab.client import Project
from bot.gitlab.errors import GitLabUnavailable, NotFound

#: A compare listing this many files or more may have been cut short by GitLab's diff limits:
#: the change is then too large to be checked, and is treated as differing.
MAX_COMPARE_FILES = 1000
CONTENT_SHA256_HEADER = "X-Gitlab-Content-Sha256"


class TooLargeToCheck(Exception):
    """GitLab's answer may not list every changed path (too many files, or it timed out)."""


@dataclass(frozen=True)
class Comparison:
    """The paths changed between the target branch and `head_sha`."""

    head_sha: str
    changes: tuple[ChangedPath, ...]

    @property
    def paths(self) -> list[str]:
        """Every path touched, sorted (both sides of renames)."""
        found: set[str] = set()
        for change in self.changes:
            found |= change.paths
        return sorted(found)


def _changed(entry: dict[str, Any]) -> ChangedPath | None:
    old, new = entry.get("old_path"), entry.get("new_path")
    if not isinstance(old, str) or not isinstance(new, str):
        return None
    return ChangedPath(
        old_path=old,
        new_path=new,
        new_file=entry.get("new_file") is True,
        deleted_file=entry.get("deleted_file") is True,
        renamed_file=entry.get("renamed_file") is True,
    )


def compare_changes(project: Project, target_branch: str, head_sha: str) -> Comparison:
    """The paths `head_sha` changes relative to its merge base with `target_branch` (one GET).

    Raises TooLargeToCheck when GitLab may have left paths out, and GitLabUnavailable when the
    answer is about another commit than the one asked for.
    """
    data = get_json(
        project.gl,
        f"{project.path}/repository/compare",
        what=f"compare {target_branch}...{head_sha[:12]}",
        query={"from": target_branch, "to": head_sha, "straight": "false"},
    )
    if data.get("compare_timeout") is True:
        raise TooLargeToCheck("GitLab timed out comparing the change")
    commit = data.get("commit")
    answered = commit.get("id") if isinstance(commit, dict) else None
    if isinstance(answered, str) and answered and answered != head_sha:
        raise GitLabUnavailable(f"compare answered for {answered[:12]}, not {head_sha[:12]}")
    diffs = data.get("diffs")
    entries = [d for d in diffs if isinstance(d, dict)] if isinstance(diffs, list) else []
    if len(entries) >= MAX_COMPARE_FILES:
        raise TooLargeToCheck(f"the change lists {len(entries)} files or more")
    changes = tuple(c for c in (_changed(e) for e in entries) if c is not None)
    if len(changes) != len(entries):
        raise GitLabUnavailable("compare answered an entry without its paths")
    return Comparison(head_sha, changes)


def file_sha256(project: Project, path: str, ref: str) -> str | None:
    """The SHA-256 of `path`'s content at `ref`; None when the file does not exist there.

    One HEAD (GitLab sends the hash as a header); one GET more only when the header is missing.
    """
    file_path = f"{project.path}/repository/files/{quote(path, safe='')}"
    what = f"hash {path} at {ref[:12]}"
    try:
        headers = head_headers(project.gl, file_path, what=what, query={"ref": ref})
        value = headers.get(CONTENT_SHA256_HEADER.lower())
        if isinstance(value, str) and value:
            return value.strip().lower()
        data = get_json(project.gl, file_path, what=what, query={"ref": ref})
    except NotFound:
        return None
    value = data.get("content_sha256")
    if not isinstance(value, str) or not value:
        raise GitLabUnavailable(f"{what}: GitLab answered without a content hash")
    return value.strip().lower()


def read_file(project: Project, path: str, ref: str) -> bytes | None:
    """`path`'s bytes at `ref` (one raw GET); None when the file does not exist there."""
    file_path = f"{project.path}/repository/files/{quote(path, safe='')}/raw"
    try:
        return get_raw(project.gl, file_path, what=f"read {path} at {ref[:40]}", query={"ref": ref})
    except NotFound:
        return None
