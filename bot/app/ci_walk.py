"""The walk behind bot/app/ci_closure.py: the project's CI configuration and every file it
includes, followed to the end at one commit.

The walk starts where GitLab starts (the project's `ci_config_path`, read with
bot/gitlab/ci_includes.py `project_info`, else `.gitlab-ci.yml`; bot/core/ci_refs.py) and follows
every include of every file (bot/policy/ci_yaml.py) that lands in this repository:

- `local:` (a string or `local:`), `project:` naming this project (its full path compared
  case-insensitively, or its id; a name holding a variable the bot cannot expand may be it),
  `component:` of this project (`templates/<name>.yml` and `templates/<name>/template.yml`),
  `remote:` of this GitLab's raw file of this project (every ref/file split the URL allows),
  in `include:`, `spec:include` (protected, not walked: GitLab reads only its inputs) and every
  job's `trigger:include` (child pipelines); whatever `ref:` they name, they are read at the
  commit being checked;
- `template:` (GitLab's own), `artifact:` (made by a job of this configuration), other projects
  and other hosts are not in this repository: nothing to protect, nothing read;
- a path with a wildcard or a variable protects the pattern itself (a file added later that
  matches is covered) and the YAML files it matches now are walked (the repository tree at the
  commit, listed under the pattern's fixed directory, bounded);
- a `ci_config_path` in another project (`file.yml@group/project[:ref]`) or at a URL of this
  GitLab is read with the bot's token, as GitLab would read it, and walked in that project for
  includes naming this one; one the bot cannot read stops the walk.

Bounded as GitLab bounds its own (doc/ci/yaml/_index.md: "up to 150 includes per pipeline",
`ci_max_includes`; lib/gitlab/config/loader/yaml.rb: 1 MB per file): at most MAX_FILES files
besides the first, MAX_FILE_BYTES each, MAX_TOTAL_BYTES and MAX_TOTAL_NODES in all, and
MAX_TREE_ENTRIES listed. A file is read once (a cycle ends there). When the walk cannot finish
(a budget, a file the bot cannot parse, a form it cannot resolve, a project it cannot read) it
raises CiConfigUnresolved naming the file: the caller refuses the change (fail closed). GitLab
being unavailable raises its transient error (the step is tried again later).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot.core.ci_refs import (
    as_pattern,
    component_files,
    component_name,
    config_setting,
    expand,
    has_variable,
    is_pattern,
    is_yaml_file,
    literal_dir,
    names,
    raw_target,
)
from bot.core.inert import inert_line
from bot.core.path_policy import included_by
from bot.gitlab import Project
from bot.gitlab.ci_includes import ProjectInfo, TooLarge, project_info, read_text, tree_files
from bot.gitlab.errors import GitLabRefused
from bot.policy.ci_yaml import HEADER, CiConfigUnresolved, Include, parse_includes

#: Included files read besides the first (GitLab's `ci_max_includes` default).
MAX_FILES = 150
#: The largest CI file read (GitLab's MAX_YAML_SIZE).
MAX_FILE_BYTES = 1024 * 1024
#: Bytes and YAML nodes over every file of one walk (100,000 nodes parse in about 0.6 s here:
#: the node budget holds the worst walk's parsing near 1.5 s).
MAX_TOTAL_BYTES = 4 * 1024 * 1024
MAX_TOTAL_NODES = 250_000
#: Repository tree entries listed for wildcard includes over one walk (100 per call).
MAX_TREE_ENTRIES = 5_000
#: How the first file is named in reasons.
SETTING = "the project's CI/CD configuration file setting"


@dataclass(frozen=True)
class _Repo:
    """A repository the walk reads: this project at the commit, or the one holding the CI
    configuration (`ci_config_path` in another project) at its ref."""

    project: Project
    ref: str
    path: str
    id: int | None
    ours: bool


@dataclass(frozen=True)
class _File:
    repo: _Repo
    path: str
    #: the first file of another project: its absence stops the walk
    required: bool = False

    @property
    def label(self) -> str:
        return self.path if self.repo.ours else f"{self.path} of {self.repo.path}"


@dataclass
class Walk:
    """One walk: the patterns of this project it protects, each with the include naming it."""

    project: Project
    info: ProjectInfo
    at: str
    patterns: dict[str, str] = field(default_factory=dict)
    queue: deque[_File] = field(default_factory=deque)
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    other: _Repo | None = None
    used: dict[str, int] = field(default_factory=dict)
    trees: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)

    def run(self) -> tuple[dict[str, str], bool]:
        """Each protected pattern with the include that named it, and whether the result holds
        for this commit for good (False: another project's files were read)."""
        self._root()
        while self.queue:
            self._visit(self.queue.popleft())
        return self.patterns, self.other is None

    # -- where the configuration starts --------------------------------------------------

    @property
    def ours(self) -> _Repo:
        return _Repo(self.project, self.at, self.info.path, self.info.id, True)

    def _root(self) -> None:
        if self.info.ci_config_path is None:
            raise CiConfigUnresolved("GitLab does not show the bot the project's CI/CD settings")
        setting = config_setting(self.info.ci_config_path)
        if setting.local is not None:
            self._add(self.ours, setting.local, SETTING, first=True)
        elif setting.project is not None and setting.file is not None:
            repo = self._named(setting.project) or self._other(setting.project, setting.ref)
            self._add(repo, setting.file, SETTING, first=True)
        elif setting.url is not None:
            self._root_url(setting.url)

    def _root_url(self, url: str) -> None:
        target = raw_target(url, self._web_root())
        if target is None:
            raise CiConfigUnresolved(
                f"{SETTING} names {inert_line(url, 120)}, which is not a file of this GitLab "
                "the bot can read"
            )
        repo = self._named(target.project)
        if repo is not None:  # this project's own file: every split it may mean
            for _ref, file in target.candidates:
                self._add(repo, file, SETTING, first=True)
            return
        for ref, file in target.candidates:  # another project's: the first split it holds
            other = self._other(target.project, ref)
            if read_text(other.project, file, ref, MAX_FILE_BYTES) is not None:
                self._queue(_File(other, as_pattern(file), required=True), first=True)
                return
        raise CiConfigUnresolved(f"{SETTING} names {inert_line(url, 120)}, which is not there")

    def _other(self, name: str, ref: str | None) -> _Repo:
        """The project holding the CI configuration, as the bot's token reads it."""
        handle = self.project.account.project(name)
        try:
            info = project_info(handle)
        except GitLabRefused:
            raise CiConfigUnresolved(
                f"{SETTING} names {inert_line(name, 120)}, which the bot cannot read"
            ) from None
        at = ref or info.default_branch
        if at is None:
            raise CiConfigUnresolved(f"{SETTING} names {inert_line(name, 120)}, which is empty")
        self.other = _Repo(handle, at, info.path, info.id, False)
        return self.other

    # -- following includes ----------------------------------------------------------------

    def _visit(self, file: _File) -> None:
        label = inert_line(file.label, 120)
        try:
            text = read_text(file.repo.project, file.path, file.repo.ref, MAX_FILE_BYTES)
        except TooLarge as exc:
            raise CiConfigUnresolved(f"{label} is too large to check ({exc})") from None
        except GitLabRefused as exc:
            raise CiConfigUnresolved(f"{label} cannot be read ({exc})") from None
        if text is None:
            if file.required:
                raise CiConfigUnresolved(f"{label}, the CI configuration, is not there")
            return  # GitLab fails a pipeline including a missing file: nothing of it runs
        self._spend("bytes", len(text.encode()), MAX_TOTAL_BYTES, "bytes of CI configuration")
        left = MAX_TOTAL_NODES - self.used.get("nodes", 0)
        parsed = parse_includes(text, file.label, max_nodes=left)
        self._spend("nodes", parsed.nodes, MAX_TOTAL_NODES, "YAML nodes of CI configuration")
        for include in parsed.includes:
            self._follow(file, include)

    def _follow(self, file: _File, include: Include) -> None:
        said = include.said(inert_line(file.label, 120))
        walk = include.via != HEADER
        if include.kind == "local":
            self._add(file.repo, include.location, said, walk=walk)
        elif include.kind == "project":
            repo = self._named(expand(include.project, self._known()))
            if repo is not None:
                self._add(repo, include.location, said, walk=walk)
        elif include.kind == "component":
            self._component(expand(include.location, self._known()), said, walk)
        elif include.kind == "remote":
            self._remote(expand(include.location, self._known()), said, walk)
        # template, artifact: not in a repository

    def _named(self, name: str) -> _Repo | None:
        """This project, or the configuration's own, when `name` may mean it."""
        if names(name, self.info.path, self.info.id):
            return self.ours
        if self.other is not None and names(name, self.other.path, self.other.id):
            return self.other
        return None

    def _component(self, address: str, said: str, walk: bool) -> None:
        for repo in (self.ours, self.other):
            name = component_name(address, repo.path) if repo is not None else None
            if repo is not None and name is not None:
                for path in component_files(name):
                    self._add(repo, path, said, walk=walk)
                return

    def _remote(self, url: str, said: str, walk: bool) -> None:
        target = raw_target(url, self._web_root())
        if target is None:
            if has_variable(urlsplit(url).netloc) or not urlsplit(url).netloc:
                raise CiConfigUnresolved(f"{said}: the bot cannot tell which host it names")
            return  # another host, or a page that is no repository file
        repo = self._named(target.project)
        if repo is None:
            return  # another project's file
        for _ref, path in target.candidates:
            self._add(repo, path, said, walk=walk)

    def _add(
        self, repo: _Repo, path: str, said: str, *, walk: bool = True, first: bool = False
    ) -> None:
        """Protects `path` (a file or pattern) of this project and queues what it names."""
        pattern = as_pattern(path)
        if not pattern:
            raise CiConfigUnresolved(f"{said}: an include names no path")
        if repo.ours:
            self.patterns.setdefault(pattern, said)
        if not walk:
            return
        files = self._matches(repo, pattern, said) if is_pattern(pattern) else [pattern]
        for found in files:
            self._queue(_File(repo, found, required=first and not repo.ours), first=first)

    def _queue(self, file: _File, *, first: bool = False) -> None:
        key = (file.repo.path.casefold(), file.repo.ref, file.path)
        if key in self.seen:
            return  # read once: a cycle of includes ends here
        self.seen.add(key)
        if not first:
            self._spend("files", 1, MAX_FILES, "included files (GitLab's own limit)")
        self.queue.append(file)

    def _matches(self, repo: _Repo, pattern: str, said: str) -> list[str]:
        """The YAML files matching `pattern` in `repo` now (one listing per directory)."""
        under = literal_dir(pattern)
        key = (repo.path.casefold(), repo.ref, under)
        if key not in self.trees:
            left = MAX_TREE_ENTRIES - self.used.get("tree", 0)
            try:
                listing = tree_files(repo.project, repo.ref, under, max(left, 0))
            except TooLarge:
                raise CiConfigUnresolved(
                    f"{said}: {inert_line(pattern, 80)} matches among more than "
                    f"{MAX_TREE_ENTRIES} files"
                ) from None
            except GitLabRefused as exc:
                raise CiConfigUnresolved(
                    f"{said}: the files it matches cannot be listed ({exc})"
                ) from None
            self._spend("tree", len(listing), MAX_TREE_ENTRIES, "files listed")
            self.trees[key] = listing
        return [p for p in self.trees[key] if is_yaml_file(p) and included_by(p, (pattern,))]

    def _spend(self, what: str, amount: int, limit: int, words: str) -> None:
        self.used[what] = self.used.get(what, 0) + amount
        if self.used[what] > limit:
            raise CiConfigUnresolved(f"the CI configuration holds more than {limit} {words}")

    # -- this GitLab ------------------------------------------------------------------------

    def _web_root(self) -> str:
        """This GitLab's web root (scheme, host, relative root), from the project's URL."""
        url, path = self.info.web_url.rstrip("/"), self.info.path
        if url.casefold().endswith("/" + path.casefold()):
            return url[: -len(path) - 1]
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"

    def _known(self) -> dict[str, str]:
        """The predefined variables the bot knows (doc/ci/yaml/includes.md, "Use variables
        with include"); they only ever make a name mean this project."""
        root, path = self._web_root(), self.info.path
        parts = urlsplit(root)
        return {
            "CI_PROJECT_PATH": path,
            "CI_PROJECT_ID": str(self.info.id),
            "CI_PROJECT_NAME": path.rsplit("/", 1)[-1],
            "CI_PROJECT_NAMESPACE": path.rsplit("/", 1)[0] if "/" in path else "",
            "CI_PROJECT_URL": self.info.web_url,
            "CI_SERVER_URL": root,
            "CI_SERVER_FQDN": parts.netloc,
            "CI_SERVER_HOST": parts.hostname or parts.netloc,
            "CI_SERVER_PROTOCOL": parts.scheme,
        }
