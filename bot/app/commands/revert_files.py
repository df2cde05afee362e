"""What `/gitops revert` writes: each path the merged change touched, as it was before the merge.

Read from GitLab by the command's job (bot/app/commands/note.py) before the command's
transaction: the merge commit, the paths the change wrote (its request's files, or for
`/gitops apply` its MR's diff), and each file's content after the merge, on the target branch now,
and before the merge.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from bot.errors import CannotProceed
from bot.gitlab import MrView, NotFound, Project
from bot.gitlab.calls import get_json, get_list
from bot.gitlab.errors import translating
from bot.store.operations import OperationRow

#: A revert restores at most this many files (each costs three reads).
MAX_REVERT_FILES = 50


def undo_files(project: Project, op: OperationRow) -> list[dict[str, str]]:
    """The files of a change that undoes `op`: each path it touched, as it was before the merge.

    Refuses (CannotProceed) when a path changed again after the merge (restoring it would undo
    someone else's work too), when the change is too large, or when it cannot be read.
    """
    merged = op.merge_commit_sha
    if not merged and op.mr_iid is not None:
        data = get_json(project.gl, project.mr_path(op.mr_iid), what=f"read MR !{op.mr_iid}")
        merged = MrView.from_json(data).merged_sha
    if not merged:
        raise CannotProceed("the merge commit of the change is not known")
    paths = _touched_paths(project, op)
    if not paths:
        raise CannotProceed("the change touched no files")
    if len(paths) > MAX_REVERT_FILES:
        raise CannotProceed(f"the change touches more than {MAX_REVERT_FILES} files")
    before = _before_merge(project, merged, op.mr_iid)
    files: list[dict[str, str]] = []
    undoes_something = False
    for path in paths:
        after = read_file(project, path, merged)
        if read_file(project, path, op.target_branch) != after:
            raise CannotProceed(f"{path} changed again after the merge; revert it by hand")
        old = read_file(project, path, before)
        undoes_something = undoes_something or old != after
        files.append(_restore(path, old))
    if not undoes_something:
        raise CannotProceed("the merge changed none of the files it lists")
    return files


def read_file(project: Project, path: str, ref: str) -> bytes | None:
    """A file's bytes at `ref`, or None when it does not exist there (python-gitlab, one GET)."""
    what = f"read {path} at {ref[:40]}"
    try:
        with translating(what):
            remote = project.gl.projects.get(project.id, lazy=True).files.get(
                file_path=path, ref=ref
            )
    except NotFound:
        return None
    return remote.decode()


def _restore(path: str, old: bytes | None) -> dict[str, str]:
    """The change file that puts `path` back to `old` (None: it did not exist, delete it)."""
    if old is None:
        return {"path": path, "action": "delete"}
    try:
        return {"path": path, "content": old.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "path": path,
            "content": base64.b64encode(old).decode("ascii"),
            "encoding": "base64",
        }


def _touched_paths(project: Project, op: OperationRow) -> list[str]:
    """The paths a change wrote: its request's files, or for `/gitops apply` the MR's diff."""
    paths: list[str] = []
    rows: list[dict[str, Any]] = list(op.files)
    if not rows and op.mr_iid is not None:
        rows = _mr_diffs(project, op.mr_iid)
    for row in rows:
        for key in ("path", "old_path", "new_path"):
            value = row.get(key)
            if isinstance(value, str) and value and value not in paths:
                paths.append(value)
    return paths


def _mr_diffs(project: Project, iid: int) -> list[dict[str, Any]]:
    """The MR's changed files (GET .../diffs, GitLab 15.7+; else the older .../changes)."""
    try:
        return get_list(
            project.gl,
            f"{project.mr_path(iid)}/diffs",
            what=f"list the changes of !{iid}",
            limit=MAX_REVERT_FILES + 1,
        )
    except NotFound:
        data = get_json(
            project.gl, f"{project.mr_path(iid)}/changes", what=f"read the changes of !{iid}"
        )
    if data.get("overflow") is True:
        raise CannotProceed(f"the change touches more than {MAX_REVERT_FILES} files")
    changes = data.get("changes")
    return [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []


def _before_merge(project: Project, merged: str, mr_iid: int | None) -> str:
    """The target branch's commit just before the merge: a merge commit's first parent, or the
    MR's base after a fast-forward (the squash commit's parent when there is no MR)."""
    commit = get_json(
        project.gl,
        f"{project.path}/repository/commits/{quote(merged, safe='')}",
        what=f"read commit {merged[:12]}",
    )
    parents = [p for p in commit.get("parent_ids") or [] if isinstance(p, str) and p]
    if len(parents) >= 2:
        return parents[0]
    if mr_iid is not None:
        data = get_json(project.gl, project.mr_path(mr_iid), what=f"read MR !{mr_iid}")
        refs = data.get("diff_refs")
        base = refs.get("base_sha") if isinstance(refs, dict) else None
        if isinstance(base, str) and base and base != merged:
            return base
    if parents:
        return parents[0]
    raise CannotProceed(f"commit {merged[:12]} has no parent to restore from")
