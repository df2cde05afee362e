"""The GitLab reads the CI configuration's closure needs (bot/app/ci_closure.py walks it).

- `project_info`: the project's id, full path, web URL, default branch and `ci_config_path`
  (`GET /projects/:id`; `lib/api/entities/project.rb` shows `ci_config_path` to whoever may read
  the code), kept per account for INFO_TTL seconds: a change reads it at most once a minute.
- `read_text`: one file's raw bytes at a commit (`GET .../repository/files/:path/raw`), None
  when it is not there, refused past a size.
- `tree_files`: the files under a directory at a commit (`GET .../repository/tree` with
  `recursive=true`, paginated as GitLab paginates it, `Link` headers), bounded.

A branch's head commit is read with bot/gitlab/policy_file.py `read_branch`.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from bot.gitlab.calls import get_json, get_list
from bot.gitlab.client import Account, Project
from bot.gitlab.compare import read_file
from bot.gitlab.errors import GitLabUnavailable, NotFound

#: Seconds a project's settings read once are used again (a changed `ci_config_path` is seen
#: within this; the merge-time check reads the target branch's head every time).
INFO_TTL = 60.0


@dataclass(frozen=True, slots=True)
class ProjectInfo:
    """What the walk needs to know of a project."""

    id: int
    #: the full path (`group/sub/project`)
    path: str
    web_url: str
    #: the custom CI/CD configuration file setting ("" when unset: `.gitlab-ci.yml`; None
    #: when GitLab did not show it to this account)
    ci_config_path: str | None
    default_branch: str | None


_INFO: weakref.WeakKeyDictionary[Account, dict[str, tuple[float, ProjectInfo]]] = (
    weakref.WeakKeyDictionary()
)


def project_info(project: Project, now: Callable[[], float] = time.monotonic) -> ProjectInfo:
    """The project as GitLab shows it to this account (one GET, at most once per INFO_TTL)."""
    cache = _INFO.setdefault(project.account, {})
    key = str(project.id)
    kept = cache.get(key)
    if kept is not None and now() - kept[0] < INFO_TTL:
        return kept[1]
    data = get_json(project.gl, project.path, what="read the project's settings")
    pid, path, web_url = data.get("id"), data.get("path_with_namespace"), data.get("web_url")
    if not isinstance(pid, int) or not isinstance(path, str) or not isinstance(web_url, str):
        raise GitLabUnavailable("read the project's settings: GitLab answered without its path")
    config, branch = data.get("ci_config_path"), data.get("default_branch")
    info = ProjectInfo(
        id=pid,
        path=path,
        web_url=web_url,
        ci_config_path=None
        if "ci_config_path" not in data
        else (config if isinstance(config, str) else ""),
        default_branch=branch if isinstance(branch, str) and branch else None,
    )
    for name in (key, str(info.id), info.path):  # the same project by id or by path
        cache[name] = (now(), info)
    return info


def forget_project_info(account: Account) -> None:
    """Drops what this account read of projects' settings (the next walk reads them again)."""
    _INFO.pop(account, None)


#: GitLab's answer for a directory that is not there (or a ref that is not).
TREE_NOT_FOUND = "404 Tree Not Found"


class TooLarge(Exception):
    """A file or listing larger than the walk reads."""


def read_text(project: Project, path: str, ref: str, limit: int) -> str | None:
    """`path` at `ref` as text (one GET); None when it is not there; TooLarge past `limit`
    bytes. Bytes that are not UTF-8 are replaced: GitLab would not read them either."""
    content = read_file(project, path, ref)
    if content is None:
        return None
    if len(content) > limit:
        raise TooLarge(f"{len(content)} bytes, more than {limit}")
    return content.decode("utf-8", "replace")


def tree_files(project: Project, ref: str, under: str, limit: int) -> list[str]:
    """Every file (blob) under directory `under` ("" for the root) at `ref`, recursively; one
    GET per 100 entries; TooLarge past `limit` entries. A directory that is not there has
    none (GitLab answers 404 "Tree Not Found", lib/api/repositories.rb); any other refusal
    raises."""
    query = {"ref": ref, "recursive": "true"}
    if under:
        query["path"] = under
    try:
        entries = get_list(
            project.gl,
            f"{project.path}/repository/tree",
            what=f"list files under {under or '/'} at {ref[:12]}",
            query=query,
            limit=limit + 1,
        )
    except NotFound as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        if body.get("message") == TREE_NOT_FOUND:
            return []
        raise
    if len(entries) > limit:
        raise TooLarge(f"more than {limit} entries under {under or '/'}")
    return [str(e["path"]) for e in entries if e.get("type") == "blob" and "path" in e]
