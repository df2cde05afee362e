"""The target branch resolved once to its head commit, and a repository file read at that commit.

A branch is read with the branches API (lib/api/branches.rb `GET /projects/:id/repository/
branches/:branch`: `repository.find_branch`, a lookup of `refs/heads/<name>` only), which also
says whether the branch is protected and whether it is the default one (lib/api/entities/
branch.rb). Everything else the bot reads from the repository for a change -- the policy file,
its JSON Schemas, the CI configuration -- is read at the commit SHA that read returned, never at
the branch's name: GitLab resolves a `ref` name as git does (`refs/tags/<name>` before
`refs/heads/<name>`), so a tag named like the branch would shadow it.

A file's absence at a commit is GitLab's `404 File Not Found` (lib/api/files.rb
`not_found!('File')`); `404 Commit Not Found` or `404 Project Not Found` for a commit just read
means the project or the commit is gone, which the caller reports like any failed read. Any
other 404 (an older or proxied GitLab's page) counts as no file: the branch was just read, and a
missing policy file leaves the operator's values, which a file could only tighten.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.gitlab.calls import get_json
from bot.gitlab.client import Project
from bot.gitlab.errors import GitLabUnavailable, NotFound

#: GitLab's 404s that say the commit or the project, not the file, is missing.
GONE = ("404 Commit Not Found", "404 Project Not Found")


@dataclass(frozen=True, slots=True)
class BranchHead:
    """A branch as GitLab states it: its head commit, and whether it is protected or the
    project's default branch."""

    name: str
    sha: str
    protected: bool
    default: bool


class NoSuchBranch(Exception):
    """The branch does not exist (the change cannot target it)."""


class NoSuchProject(NoSuchBranch):
    """The project does not exist, or the bot's account cannot see it (GitLab answers both
    alike: `404 Project Not Found`)."""


def read_branch(project: Project, branch: str) -> BranchHead:
    """The branch's head commit and protection (one GET); NoSuchBranch when it is not there."""
    try:
        data = get_json(
            project.gl,
            f"{project.path}/repository/branches/{quote(branch, safe='')}",
            what=f"read branch {branch}",
        )
    except NotFound as exc:
        if _message(exc.body) == "404 Project Not Found":
            raise NoSuchProject(project.path) from None
        raise NoSuchBranch(branch) from None
    commit = data.get("commit")
    sha = commit.get("id") if isinstance(commit, dict) else None
    if not isinstance(sha, str) or not sha:
        raise GitLabUnavailable(f"read branch {branch}: GitLab answered without its commit")
    return BranchHead(
        name=branch,
        sha=sha,
        protected=data.get("protected") is True,
        default=data.get("default") is True,
    )


def read_file_at(project: Project, path: str, sha: str) -> bytes | None:
    """`path`'s bytes at commit `sha` (one GET); None when the commit holds no such file."""
    try:
        data = get_json(
            project.gl,
            f"{project.path}/repository/files/{quote(path, safe='')}",
            what=f"read {path} at {sha[:12]}",
            query={"ref": sha},
        )
    except NotFound as exc:
        if _message(exc.body) in GONE:
            raise GitLabUnavailable(f"read {path} at {sha[:12]}: {exc}") from None
        return None
    content = data.get("content")
    if not isinstance(content, str):
        raise GitLabUnavailable(f"read {path} at {sha[:12]}: GitLab answered without content")
    try:
        return base64.b64decode(content, validate=True)
    except binascii.Error:
        raise GitLabUnavailable(f"read {path} at {sha[:12]}: content is not base64") from None


def _message(body: Any) -> str | None:
    """The `message` of a GitLab error body (None when it has none)."""
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else None
