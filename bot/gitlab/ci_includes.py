"""The files a project's CI configuration includes locally, read at a ref (protected paths).

`.gitlab-ci.yml` is read raw at the ref; its `include:` entries that are local (a string that is
not a URL, or `{local: ...}`) are collected, and each included file that names one path (no
wildcard, no variable) is read in turn for its own includes, up to MAX_FILES reads in all. A
pattern with a wildcard or a variable protects every path it can match. A project without a CI
file includes nothing (one 404). A CI file that cannot be parsed protects nothing beyond the
static list: GitLab could not run it either, and the static list still covers `.gitlab-ci.yml`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import yaml

from bot.gitlab.client import Project
from bot.gitlab.compare import read_file

log = logging.getLogger(__name__)

CI_CONFIG_PATH = ".gitlab-ci.yml"
#: Files read per check (the CI file and the local files it includes, nested).
MAX_FILES = 10
#: A CI file larger than this is not parsed (GitLab's own limit is 1 MB by default).
MAX_CI_BYTES = 1024 * 1024


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads GitLab's custom tags (`!reference [...]`) as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_multi_constructor("!", _any_tag)


def parse_local_includes(text: str) -> list[str]:
    """The local include paths or patterns one CI file names (leading `/` removed)."""
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no object tags
    except yaml.YAMLError:
        return []
    if not isinstance(data, dict):
        return []
    return [p.strip().lstrip("/") for p in _locals(data.get("include")) if p.strip().lstrip("/")]


def _locals(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if not value.startswith(("http://", "https://")):
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from _locals(item)
    elif isinstance(value, dict):
        local = value.get("local")
        if isinstance(local, str):
            yield local


def _read_raw(project: Project, path: str, ref: str) -> str | None:
    content = read_file(project, path, ref)
    if content is None or len(content) > MAX_CI_BYTES:
        return None
    return content.decode("utf-8", "replace")


def _is_pattern(path: str) -> bool:
    return "*" in path or "$" in path


def local_includes(project: Project, ref: str) -> list[str]:
    """Every path or pattern the CI configuration at `ref` includes locally (nested included)."""
    found: list[str] = []
    queue = [CI_CONFIG_PATH]
    seen: set[str] = set()
    while queue and len(seen) < MAX_FILES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = _read_raw(project, path, ref)
        if text is None:
            continue
        for include in parse_local_includes(text):
            if include not in found:
                found.append(include)
            if not _is_pattern(include) and include not in seen:
                queue.append(include)
    if queue:
        log.warning(
            "CI includes read only in part (more than %d files)",
            MAX_FILES,
            extra={"gitlab_project": str(project.id)},
        )
    return found
