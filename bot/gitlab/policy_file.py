"""The repository policy file at a branch's head, with the commit it was read at: one GET of
the file at the branch (its `commit_id` is the branch's head). GitLab's files API tells a
missing file from a missing branch by its 404's message (lib/api/files.rb: `404 File Not
Found`, `404 Commit Not Found`), so neither needs a second read; only a 404 saying neither (an
older or proxied GitLab) costs one more GET, of the branch, for the head the absence was seen
at."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.gitlab.calls import get_json
from bot.gitlab.client import Project
from bot.gitlab.errors import GitLabUnavailable, NotFound

#: GitLab's 404 for a ref that resolves to no commit (`not_found!('Commit')`).
COMMIT_NOT_FOUND = "404 Commit Not Found"
#: GitLab's 404 for a path with no blob at that commit (`not_found!('File')`).
FILE_NOT_FOUND = "404 File Not Found"


@dataclass(frozen=True, slots=True)
class FileFound:
    """The file's bytes at a branch's head, and that head's commit."""

    sha: str
    content: bytes


@dataclass(frozen=True, slots=True)
class NoFile:
    """No such file at the branch's head; the head's commit when it was read (None: GitLab
    said "no such file" and the branch was not read)."""

    sha: str | None
    content: None = None


#: What `read_file_at_head` found (`content is None`: no such file).
FileAtHead = FileFound | NoFile


class NoSuchBranch(Exception):
    """The branch does not exist (the change cannot target it either)."""


def read_file_at_head(project: Project, path: str, branch: str) -> FileAtHead:
    """`path` as it is at the head of `branch`; NoSuchBranch when there is no such branch."""
    try:
        data = get_json(
            project.gl,
            f"{project.path}/repository/files/{quote(path, safe='')}",
            what=f"read {path} at {branch}",
            query={"ref": branch},
        )
    except NotFound as exc:
        said = _message(exc.body)
        if said == FILE_NOT_FOUND:
            return NoFile(None)  # the branch is there, the file is not
        if said == COMMIT_NOT_FOUND:
            raise NoSuchBranch(branch) from None
        # a 404 that says neither (a project not found, a proxy's page): read the branch
        return NoFile(_head(project, branch))
    sha = data.get("commit_id")
    content = data.get("content")
    if not isinstance(sha, str) or not sha or not isinstance(content, str):
        raise GitLabUnavailable(f"read {path} at {branch}: GitLab answered without its commit")
    try:
        return FileFound(sha, base64.b64decode(content, validate=True))
    except binascii.Error:
        raise GitLabUnavailable(f"read {path} at {branch}: content is not base64") from None


def _message(body: Any) -> str | None:
    """The `message` of a GitLab error body (None when it has none)."""
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else None


def _head(project: Project, branch: str) -> str:
    """The branch's head commit (one GET); NoSuchBranch when it is not there."""
    try:
        data = get_json(
            project.gl,
            f"{project.path}/repository/branches/{quote(branch, safe='')}",
            what=f"read branch {branch}",
        )
    except NotFound:
        raise NoSuchBranch(branch) from None
    commit = data.get("commit")
    sha = commit.get("id") if isinstance(commit, dict) else None
    if not isinstance(sha, str) or not sha:
        raise NoSuchBranch(branch)
    return sha
