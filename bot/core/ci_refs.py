"""What a CI include or a project's CI/CD configuration setting names, read as GitLab reads it.

Pure: strings in, locations out. The YAML side is bot/policy/ci_yaml.py; the walk that reads
GitLab is bot/app/ci_closure.py. GitLab's sources, each cited where it is relied on:

- `lib/gitlab/ci/config/external/mapper/normalizer.rb`: a string include is a `remote:` when it
  is a URL, else a `local:`; variables are expanded first (`lib/expand_variables.rb`: `$NAME`,
  `${NAME}` and `%NAME%`; an unknown one expands to nothing);
- `lib/gitlab/ci/config/external/file/local.rb` and `project.rb`: a leading `/` is removed, a
  project's name is compared downcased with the full path (`project:` of a list: its first);
- `doc/ci/components/_index.md`: `<fqdn>/<project path>/<name>@<version>` names the file
  `templates/<name>.yml` or `templates/<name>/template.yml` of that project;
- `lib/gitlab/ci/project_config/external_project.rb` and `remote.rb`: `ci_config_path` is
  `file@group/project[:ref]` (`\\A.+(yml|yaml)@.+\\z`), an http(s) URL, or a path in the
  repository (doc/ci/pipelines/settings.md, "Specify a custom CI/CD configuration file").

A variable the bot cannot know stands for anything: in a path it becomes `**` (so the pattern
protects whatever it may expand to); in a project's name it may be this project.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

#: The CI configuration file when the project names none.
DEFAULT_CI_CONFIG = ".gitlab-ci.yml"
#: `$NAME`, `${NAME}`, `%NAME%` (lib/expand_variables.rb VARIABLES_REGEXP).
VARIABLE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|%([A-Za-z_][A-Za-z0-9_]*)%"
)
#: GitLab's CI/CD inputs interpolation (`$[[ inputs.name ]]`): its value comes from whoever
#: includes the file, which the bot does not resolve.
INTERPOLATION = "$[["
_URL = re.compile(r"https?://", re.IGNORECASE)
_EXTERNAL = re.compile(r"\A.+(yml|yaml)@.+\Z", re.DOTALL)


def expand(text: str, known: Mapping[str, str]) -> str:
    """`text` with the variables named in `known` replaced by their values; others kept."""

    def one(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return known.get(name, match.group(0))

    return VARIABLE.sub(one, text)


def has_variable(text: str) -> bool:
    """Whether `text` still holds a CI variable the bot could not expand."""
    return VARIABLE.search(text) is not None


def as_pattern(path: str) -> str:
    """A repository path or include pattern as a protected pattern: no leading `/`, no `.` or
    empty segments, each variable `**` (it may expand to anything, slashes included)."""
    wild = VARIABLE.sub("**", path.strip())
    return "/".join(s for s in wild.split("/") if s not in ("", "."))


def is_pattern(pattern: str) -> bool:
    """Whether a protected pattern names many files (a wildcard) rather than one."""
    return "*" in pattern


def is_yaml_file(path: str) -> bool:
    """GitLab includes only `.yml`/`.yaml` files (file/base.rb YAML_ALLOWLIST_EXTENSION)."""
    return path.lower().endswith((".yml", ".yaml"))


def literal_dir(pattern: str) -> str:
    """The deepest directory of `pattern` without a wildcard ("" for the root): the subtree a
    listing of the files it matches needs."""
    segments = pattern.split("/")[:-1]
    kept: list[str] = []
    for segment in segments:
        if "*" in segment:
            break
        kept.append(segment)
    return "/".join(kept)


def is_url(text: str) -> bool:
    """GitLab's test for a remote include: an http(s) URL."""
    return _URL.match(text.strip()) is not None


def project_name(value: object) -> str | None:
    """The project an `include:project` names (the first of a list, as GitLab takes it)."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value.strip().strip("/") if isinstance(value, str) and value.strip() else None


def names(name: str, path: str, project_id: int | None = None) -> bool:
    """Whether a project's name (full path, compared case-insensitively, or numeric id) may
    mean the project at `path`; a name holding a variable the bot could not expand may."""
    wanted = name.strip().strip("/")
    if has_variable(wanted):
        return True
    if project_id is not None and wanted == str(project_id):
        return True
    return wanted.casefold() == path.strip("/").casefold()


def component_files(name: str) -> tuple[str, str]:
    """The two files a component `name` may be (doc/ci/components/_index.md, "Directory
    structure"): `templates/<name>.yml` and `templates/<name>/template.yml`."""
    return f"templates/{name}.yml", f"templates/{name}/template.yml"


def component_name(address: str, path: str) -> str | None:
    """The component's name when `<host>/<project path>/<name>@<version>` names the project at
    `path` (any host: a host of the same path is this instance or nothing that runs here);
    None when it names another project."""
    where = address.strip().split("@", 1)[0]
    segments = [s for s in where.split("/") if s]
    if len(segments) < 3:
        return None
    inside = segments[1:]  # the host is the first segment
    project = [s.casefold() for s in path.strip("/").split("/")]
    if any(has_variable(s) for s in inside[:-1]):
        return "/".join(inside[-1:])  # a project path the bot cannot expand: may be this one
    if [s.casefold() for s in inside[: len(project)]] == project and len(inside) > len(project):
        return "/".join(inside[len(project) :])
    return None


@dataclass(frozen=True, slots=True)
class RawTarget:
    """A raw-file URL on this GitLab: the project's full path (or id) and the (ref, file)
    splits the URL allows (a ref may hold slashes: each split is a candidate)."""

    project: str
    candidates: tuple[tuple[str, str], ...]


def raw_target(url: str, web_root: str) -> RawTarget | None:
    """The project file a URL on this GitLab (`web_root`, scheme and host with any relative
    root) serves raw: `<project>/-/raw/<ref>/<file>`, the legacy `<project>/raw/<ref>/<file>`,
    or the API's `/api/v4/projects/<id>/repository/files/<file>/raw?ref=<ref>`; None for
    another host or another kind of page."""
    parts, root = urlsplit(url.strip()), urlsplit(web_root.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    if parts.netloc.casefold() != root.netloc.casefold():
        return None
    segments = [s for s in parts.path.split("/") if s]
    for prefix in [s for s in root.path.split("/") if s]:
        if not segments or segments[0] != prefix:
            return None
        segments = segments[1:]
    if segments[:3] == ["api", "v4", "projects"] and segments[-1:] == ["raw"]:
        return _api_target(segments[3:-1], parts.query)
    for marker in (["-", "raw"], ["raw"]):
        width = len(marker)
        for i in range(1, len(segments) - width):
            if segments[i : i + width] == marker:
                project = "/".join(unquote(s) for s in segments[:i])
                rest = [unquote(s) for s in segments[i + width :]]
                splits = tuple(
                    ("/".join(rest[:k]), "/".join(rest[k:])) for k in range(1, len(rest))
                )
                return RawTarget(project, splits) if splits else None
    return None


def _api_target(segments: list[str], query: str) -> RawTarget | None:
    """`<id>/repository/files/<file>` of the files API's raw URL."""
    if len(segments) != 4 or segments[1:3] != ["repository", "files"]:
        return None
    ref = ""
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key == "ref":
            ref = unquote(value)
    return RawTarget(unquote(segments[0]), ((ref or "HEAD", unquote(segments[3])),))


@dataclass(frozen=True, slots=True)
class ConfigSetting:
    """Where a project's CI configuration is, from its `ci_config_path` setting: a path in this
    repository (`local`), a file of another project at an optional ref, or a URL."""

    local: str | None = None
    project: str | None = None
    file: str | None = None
    ref: str | None = None
    url: str | None = None


def config_setting(value: str | None) -> ConfigSetting:
    """The setting read as GitLab reads it (project_config/{repository,external_project,
    remote}.rb): empty is `.gitlab-ci.yml`."""
    text = (value or "").strip()
    if not text:
        return ConfigSetting(local=DEFAULT_CI_CONFIG)
    if is_url(text):
        return ConfigSetting(url=text)
    if _EXTERNAL.match(text):
        file, project = text.split("@", 1)
        project, _, ref = project.partition(":")
        return ConfigSetting(project=project, file=file, ref=ref or None)
    return ConfigSetting(local=text)
