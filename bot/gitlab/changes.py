"""The author bot's writes: the change's branch, commit and MR; closing the MR; deleting the branch.

Every function reads remote state first and is safe to re-run after a crash at any point: the
branch is named from the operation id and its commit carries a `Change-Request: <operation_id>`
trailer, which is how a re-run recognises (and reuses) what an earlier run made.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.core.inert import ensure_inert, inert_title
from bot.gitlab.calls import delete, get_json, get_list, head, post_json, put_json
from bot.gitlab.client import Project
from bot.gitlab.errors import BranchNotOurs, GitLabRefused, NotFound, UnknownOutcome
from bot.gitlab.reads import read_mr
from bot.gitlab.views import MrView

log = logging.getLogger(__name__)

#: Every branch the bot makes is `<prefix><operation_id>`; nothing else is ever deleted by it.
BRANCH_PREFIX = "gitops/"
#: The commit trailer that ties a commit to the operation that made it.
TRAILER = "Change-Request"
#: How many commits of an existing branch are searched for our trailer.
TRAILER_SEARCH_DEPTH = 20
_OPERATION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class ChangeRef:
    """Where a change lives: its branch, its commit, its MR."""

    branch: str
    commit_sha: str
    mr_iid: int
    mr_url: str
    #: True when this call made the commit or opened the MR; False when all of it was there
    created: bool
    #: the MR's target project id and head SHA, as GitLab answered (saves a read)
    project_id: int | None = None
    head_sha: str | None = None
    #: True when `commit_sha` is the commit this call wrote (its content is exactly `files`);
    #: False when it was found again by its trailer, which anyone could have written
    wrote_commit: bool = False


def branch_name(operation_id: str) -> str:
    """The branch of an operation's change (`gitops/<operation_id>`)."""
    if not _OPERATION_ID.match(operation_id) or ".." in operation_id or operation_id.endswith("."):
        raise ValueError(f"operation id {operation_id!r} cannot name a branch")
    return BRANCH_PREFIX + operation_id


def has_trailer(message: str, operation_id: str) -> bool:
    """True when a commit message has the line `Change-Request: <operation_id>`."""
    wanted = f"{TRAILER}: {operation_id}"
    return any(line.strip() == wanted for line in message.splitlines())


def commit_message(title: str, operation_id: str) -> str:
    """The change's commit message: the title made inert, a blank line, then our trailer."""
    return f"{inert_title(title)}\n\n{TRAILER}: {operation_id}\n"


def _branch_path(project: Project, branch: str) -> str:
    return f"{project.path}/repository/branches/{quote(branch, safe='')}"


def _our_commit(project: Project, branch: str, operation_id: str) -> str | None:
    """The sha of our commit on `branch`; None when the branch is missing; raises if not ours."""
    try:
        data = get_json(project.gl, _branch_path(project, branch), what=f"read branch {branch}")
    except NotFound:
        return None
    head_commit = data.get("commit")
    if not isinstance(head_commit, dict):
        head_commit = {}
    if has_trailer(str(head_commit.get("message") or ""), operation_id):
        return str(head_commit.get("id") or "")
    # someone may have pushed on top of our commit: look a little further back
    commits = get_list(
        project.gl,
        f"{project.path}/repository/commits",
        what=f"list commits of {branch}",
        query={"ref_name": branch},
        limit=TRAILER_SEARCH_DEPTH,
    )
    for commit in commits:
        if has_trailer(str(commit.get("message") or ""), operation_id):
            return str(commit.get("id") or "")
    raise BranchNotOurs(
        f"branch {branch} exists without a '{TRAILER}: {operation_id}' commit; "
        "it was not made by this operation and is left untouched"
    )


def _actions(
    project: Project,
    base: str,
    files: Sequence[Mapping[str, str]],
    known: Mapping[str, bool],
) -> list[dict[str, str]]:
    """Commit actions: create or update (does the file exist at `base`, the commit the branch
    starts from? `known` says for the paths the caller read there: a commit never changes), or
    delete."""
    actions: list[dict[str, str]] = []
    for spec in files:
        path = spec.get("path") or ""
        if not path:
            raise ValueError("every file of a change needs a path")
        exists = known.get(path)
        if exists is None:
            exists = _exists(project, path, base)
        if spec.get("action") == "delete":
            if exists:  # deleting what is already gone would fail the whole commit
                actions.append({"action": "delete", "file_path": path})
            continue
        if "content" not in spec:
            raise ValueError(f"file {path} needs content (or action 'delete')")
        action = {"action": "update" if exists else "create", "file_path": path}
        action["content"] = spec["content"]
        if spec.get("encoding"):
            action["encoding"] = spec["encoding"]
        actions.append(action)
    return actions


def _exists(project: Project, path: str, base: str) -> bool:
    """Whether commit `base` holds `path` (one HEAD)."""
    file_path = f"{project.path}/repository/files/{quote(path, safe='')}"
    try:
        head(project.gl, file_path, what=f"check {path}", query={"ref": base})
    except NotFound:
        return False
    return True


def _find_mr(project: Project, branch: str) -> MrView | None:
    """Our MR for `branch`: an open one, else a merged one; None when there is neither."""
    rows = get_list(
        project.gl,
        f"{project.path}/merge_requests",
        what=f"find the MR of {branch}",
        query={"source_branch": branch, "state": "all"},
        limit=20,
    )
    mrs = [MrView.from_json(row) for row in rows]
    # the MR lives in this project; an MR from a fork's branch of the same name is not ours
    mrs = [mr for mr in mrs if mr.source_project_id == mr.target_project_id]
    for state in ("opened", "locked", "merged"):
        for mr in mrs:
            if mr.state == state:
                return mr
    return None


def _commit(
    project: Project,
    branch: str,
    operation_id: str,
    start_sha: str,
    actions: list[dict[str, str]],
    title: str,
) -> tuple[str, bool]:
    """Creates the branch from commit `start_sha` with our one commit (a single call; the
    commits API's `start_sha`, lib/api/commits.rb); its sha, and True when GitLab's answer to
    our write gave it (False: found again after a lost answer)."""
    message = commit_message(title, operation_id)
    ensure_inert(message, markdown=False)
    data = {
        "branch": branch,
        "start_sha": start_sha,
        "commit_message": message,
        "actions": actions,
    }
    try:
        created = post_json(
            project.gl, f"{project.path}/repository/commits", what="commit the change", data=data
        )
        return str(created.get("id") or ""), True
    except (UnknownOutcome, GitLabRefused) as err:
        # a timeout, or "branch already exists" after a concurrent run: did our commit land?
        if isinstance(err, GitLabRefused) and err.status_code != 400:
            raise
        sha = _our_commit(project, branch, operation_id)
        if sha is None:
            raise
        return sha, False


def _open_mr(project: Project, data: dict[str, Any], branch: str) -> MrView:
    try:
        return MrView.from_json(
            post_json(project.gl, f"{project.path}/merge_requests", what="open the MR", data=data)
        )
    except (UnknownOutcome, GitLabRefused) as err:
        # a timeout, or 409 "another open merge request already exists for this source branch"
        if isinstance(err, GitLabRefused) and err.status_code != 409:
            raise
        found = _find_mr(project, branch)
        if found is None:
            raise
        return found


def create_change(
    project: Project,
    *,
    operation_id: str,
    target_branch: str,
    start_sha: str,
    files: Sequence[Mapping[str, str]],
    title: str,
    description: str,
    labels: Sequence[str] = (),
    fresh: bool = False,
    known: Mapping[str, bool] | None = None,
) -> ChangeRef:
    """Makes (or finds again) the branch, the one commit and the MR of an operation's change.
    The branch starts from `start_sha`, the target branch's head commit resolved when the change
    started (never the branch's name: a tag of that name would shadow it); `known` says which
    paths exist at that commit where the caller read them (the others cost a HEAD each).

    `fresh`: no earlier run of this operation can have written anything, and the branch is
    named from the operation id, so nothing else writes it: neither the branch nor an MR is
    looked for first (two calls fewer on every new change). Should the branch exist after all,
    the commit's write is refused ("already exists") and the branch is read then, as after a
    lost answer: a commit with our trailer is reused, any other branch is left untouched.
    """
    branch = branch_name(operation_id)
    title = inert_title(title)  # one line, no mention, nothing hidden, no leading `/`
    for text, markdown in ((branch, False), (title, False), (description, True)):
        ensure_inert(text, markdown=markdown)  # the last check before GitLab sees them
    extra = {"operation_id": operation_id, "gitlab_project": str(project.id), "branch": branch}
    mr = None if fresh else _find_mr(project, branch)
    if mr is not None and mr.state == "merged":
        log.info("change already merged; reusing its MR", extra={**extra, "mr_iid": mr.iid})
        return ChangeRef(
            branch,
            mr.merged_sha or "",
            mr.iid,
            mr.web_url,
            created=False,
            project_id=mr.target_project_id or mr.project_id,
            head_sha=mr.sha,
        )
    created = wrote = False
    sha = None if fresh else _our_commit(project, branch, operation_id)
    if sha is None:
        actions = _actions(project, start_sha, files, known or {})
        if not actions:
            raise ValueError("the change has no file to create, update or delete")
        sha, wrote = _commit(project, branch, operation_id, start_sha, actions, title)
        created = True
        if fresh and not wrote:
            mr = _find_mr(project, branch)  # the branch was there before this run: so may an MR
    if mr is None:
        data = {
            "source_branch": branch,
            "target_branch": target_branch,
            "title": title,
            "description": description,
            "labels": ",".join(labels),
            "remove_source_branch": True,
        }
        mr = _open_mr(project, data, branch)
        created = True
    log.info("change ready", extra={**extra, "mr_iid": mr.iid, "made_now": created})
    return ChangeRef(
        branch,
        sha,
        mr.iid,
        mr.web_url,
        created=created,
        project_id=mr.target_project_id or mr.project_id,
        head_sha=mr.sha or sha,
        wrote_commit=wrote,
    )


def close_mr(project: Project, iid: int) -> bool:
    """Closes the MR unless it is already closed or merged; True when this call closed it."""
    mr = read_mr(project, iid)
    if mr.state in ("closed", "merged"):
        return False
    put_json(
        project.gl, project.mr_path(iid), what=f"close MR !{iid}", data={"state_event": "close"}
    )
    return True


def delete_branch(project: Project, branch: str) -> bool:
    """Deletes one of the bot's branches; a branch already gone is fine (False)."""
    if not branch.startswith(BRANCH_PREFIX):
        raise ValueError(f"refusing to delete {branch!r}: not a {BRANCH_PREFIX} branch")
    try:
        delete(project.gl, _branch_path(project, branch), what=f"delete branch {branch}")
    except NotFound:
        return False
    return True
