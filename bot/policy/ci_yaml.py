"""A CI configuration file's includes, read from its YAML under a budget. Pure: no IO.

Every document of the file is read (a `spec:` header document comes first, its `include:` are
inputs-only files, `lib/gitlab/ci/config/external/header/mapper.rb`), and in each the global
`include:` and every job's `trigger: include:` (child pipelines, doc/ci/yaml/_index.md
"trigger:include"), whatever their `rules:` or `inputs:` say. Each entry is one of the forms
GitLab's mapper knows (`lib/gitlab/ci/config/external/mapper/matcher.rb`): a string (a URL is
`remote`, anything else `local`), or a mapping with `local`, `project` (+ `file`, one or a
list, and `ref`), `remote`, `template`, `component`, or in a trigger `artifact`.

Bounded as GitLab bounds its own loader (`lib/gitlab/config/loader/yaml.rb`: 1 MB, nesting 100):
`DepthLimitedLoader` (bot/policy/parse.py) refuses nesting past MAX_DEPTH while composing, the
composer counts nodes (MAX_NODES, aliases counted once each), and merge keys (`<<`) count every
entry they copy, so a "billion laughs" of anchors or merges stops at the budget, not the worker.
GitLab's `!reference [...]` is read as a plain value (a `Reference`); any other local tag too.
A value GitLab reads and PyYAML's SafeLoader refuses (a 4,300-digit integer, an impossible
date) stays a string. What the bot cannot read or resolve is a `CiConfigUnresolved` naming the
file: the caller refuses the change, since GitLab might run what the bot could not see.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from bot.core.ci_refs import INTERPOLATION, is_url, project_name
from bot.core.inert import inert_line
from bot.errors import CannotProceed
from bot.policy.parse import DepthLimitedLoader

#: libyaml's parser (its events), when PyYAML was built with it
_LIBYAML: Any = getattr(yaml, "CSafeLoader", None)

#: GitLab's own deepest nesting (lib/gitlab/config/loader/yaml.rb MAX_YAML_DEPTH).
MAX_DEPTH = 100
#: Nodes composed per file, and entries merge keys copy (about 1.3 s of pure-Python PyYAML on
#: this machine; a typical CI file holds one node per 10-20 bytes).
MAX_NODES = 100_000
#: What an include is (the mapping key GitLab matches it by).
KINDS = ("local", "project", "remote", "template", "component", "artifact")
#: Where includes are read from.
GLOBAL, HEADER, TRIGGER = "include", "spec:include", "trigger:include"


class CiConfigUnresolved(CannotProceed):
    """The CI configuration's closure cannot be taken to the end: the change is refused (fail
    closed); `reason` says why, naming the file and the include."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Reference:
    """GitLab's `!reference [...]`, unresolved."""

    path: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Include:
    """One include of a CI file: its kind, where it points, and where the file says it."""

    kind: str
    #: the local path or pattern, the project's file, the component address, the URL, ...
    location: str
    #: for `project`: the project named
    project: str = ""
    #: GLOBAL, HEADER (inputs only: GitLab does not expand that file's includes) or TRIGGER
    via: str = GLOBAL
    #: the job whose `trigger:` holds it (TRIGGER only)
    job: str = ""

    def said(self, name: str) -> str:
        """How a reason names it: `trigger:include:local of job deploy in ci/a.yml`."""
        return _where(f"{self.via}:{self.kind}", self.job, name)


def _where(what: str, job: str, name: str) -> str:
    """`what` (an include key) in file `name`, of `job` when in a trigger."""
    return f"{what}{f' of job {inert_line(job, 60)}' if job else ''} in {name}"


class CiLoader(DepthLimitedLoader):
    """The bounded loader: depth, nodes and merge-key copies counted; GitLab's tags plain.
    Its events come from libyaml's parser when PyYAML has it (four times faster than the
    pure-Python scanner and parser); composing, where the bounds are counted, stays Python."""

    max_depth = MAX_DEPTH
    #: the nodes this file may compose (and entries its merge keys may copy)
    max_nodes = MAX_NODES
    nodes = 0
    _merged = 0

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._events: Any = _LIBYAML(stream) if _LIBYAML is not None else None

    def check_event(self, *choices: Any) -> bool:
        if self._events is None:
            return bool(super().check_event(*choices))
        return bool(self._events.check_event(*choices))

    def peek_event(self) -> Any:
        if self._events is None:
            return super().peek_event()  # type: ignore[no-untyped-call]
        return self._events.peek_event()

    def get_event(self) -> Any:
        if self._events is None:
            return super().get_event()  # type: ignore[no-untyped-call]
        return self._events.get_event()

    def dispose(self) -> None:
        if self._events is not None:
            self._events.dispose()
        super().dispose()

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"more than {self.max_nodes} YAML nodes", event.start_mark
            )
        return super().compose_node(parent, index)

    def flatten_mapping(self, node: Any) -> None:
        super().flatten_mapping(node)
        self._merged += len(node.value)
        if self._merged > self.max_nodes:
            raise yaml.constructor.ConstructorError(
                None, None, f"merge keys copy more than {self.max_nodes} entries", node.start_mark
            )


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        value: Any = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)  # type: ignore[arg-type]
    if suffix == "reference":
        return Reference(tuple(value) if isinstance(value, list) else (value,))
    return value


def _lenient(tag: str) -> Any:
    """The SafeLoader constructor of `tag`, keeping the text when Python cannot read it."""
    strict = yaml.SafeLoader.yaml_constructors[tag]

    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        try:
            return strict(loader, node)
        except (ValueError, OverflowError):
            return loader.construct_scalar(node)  # type: ignore[arg-type]

    return construct


CiLoader.add_multi_constructor("!", _tagged)
for _tag in ("int", "float", "timestamp"):
    CiLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _lenient(f"tag:yaml.org,2002:{_tag}"))


def load_documents(text: str, name: str, max_nodes: int = MAX_NODES) -> tuple[list[Any], int]:
    """Every YAML document of the file, and the nodes they took; CiConfigUnresolved when the
    bot cannot read it within `max_nodes`."""
    documents: list[Any] = []
    try:
        loader = CiLoader(text)
        loader.max_nodes = min(max_nodes, MAX_NODES)
        try:
            while loader.check_node():
                node = loader.get_node()
                documents.append(loader.construct_document(node))
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}: " if mark is not None else ""
        problem = inert_line(str(exc.problem or exc.context or "invalid YAML"), 120)
        raise CiConfigUnresolved(f"{name}:{where}cannot be read ({problem})") from None
    except (yaml.YAMLError, RecursionError, TypeError) as exc:
        detail = inert_line(str(exc), 120) or type(exc).__name__
        raise CiConfigUnresolved(f"{name}: cannot be read ({detail})") from None
    return documents, loader.nodes


@dataclass(frozen=True, slots=True)
class CiFile:
    """What one CI file includes, and the YAML nodes reading it took (the walk's budget)."""

    includes: tuple[Include, ...]
    nodes: int


def parse_includes(text: str, name: str, max_nodes: int = MAX_NODES) -> CiFile:
    """Every include the file's documents name, in order (global, header, then triggers)."""
    label = inert_line(name, 120)
    found: list[Include] = []
    lists_seen: set[int] = set()  # an aliased include list is read once
    documents, nodes = load_documents(text, label, max_nodes)
    for document in documents:
        if not isinstance(document, dict):
            continue  # GitLab runs no such document: nothing in it is included
        found += _entries(document.get("include"), GLOBAL, "", label, lists_seen)
        spec = document.get("spec")
        if isinstance(spec, dict):
            found += _entries(spec.get("include"), HEADER, "", label, lists_seen)
        for job, body in document.items():
            trigger = body.get("trigger") if isinstance(body, dict) else None
            if isinstance(trigger, dict) and "include" in trigger:
                found += _entries(trigger["include"], TRIGGER, str(job), label, lists_seen)
    return CiFile(tuple(found), nodes)


def _entries(value: Any, via: str, job: str, label: str, seen: set[int]) -> Iterator[Include]:
    """The includes of one `include:` value (a string, a mapping, or a list of them)."""
    if value is None:
        return
    if isinstance(value, list | dict):
        if id(value) in seen:
            return
        seen.add(id(value))
    where = _where(via, job, label)
    items = value if isinstance(value, list) else [value]
    for item in items:
        if item is None:
            continue
        if isinstance(item, str):
            yield _string(item, via, job, where)
        elif isinstance(item, dict):
            yield from _mapping(item, via, job, where)
        else:  # a !reference, a number, a nested list: nothing GitLab resolves as written
            raise CiConfigUnresolved(f"{where}: an entry the bot cannot resolve ({_shape(item)})")


def _shape(item: Any) -> str:
    return "!reference" if isinstance(item, Reference) else type(item).__name__


def _checked(text: str, where: str) -> str:
    if INTERPOLATION in text:
        raise CiConfigUnresolved(
            f"{where}: {inert_line(text, 80)} uses CI/CD inputs, which the bot does not resolve"
        )
    return text.strip()


def _string(item: str, via: str, job: str, where: str) -> Include:
    text = _checked(item, where)
    return Include("remote" if is_url(text) else "local", text, via=via, job=job)


def _mapping(item: dict[Any, Any], via: str, job: str, where: str) -> Iterator[Include]:
    kinds = [kind for kind in KINDS if kind in item]
    if not kinds:
        keys = ", ".join(sorted(inert_line(str(k), 30) for k in item)) or "none"
        raise CiConfigUnresolved(f"{where}: an entry of a form the bot does not know ({keys})")
    for kind in kinds:
        if kind == "project":
            yield from _project(item, via, job, where)
            continue
        value = item[kind]
        if kind == "artifact":
            continue  # generated by a job of this configuration: nothing in the repository
        if not isinstance(value, str):
            raise CiConfigUnresolved(f"{where}: `{kind}:` is not a string")
        yield Include(kind, _checked(value, where), via=via, job=job)


def _project(item: dict[Any, Any], via: str, job: str, where: str) -> Iterator[Include]:
    project = project_name(item.get("project"))
    files = item.get("file")
    if project is None:
        raise CiConfigUnresolved(f"{where}: `project:` names no project the bot can read")
    for file in files if isinstance(files, list) else [files]:
        if file is None:
            continue
        if not isinstance(file, str):
            raise CiConfigUnresolved(f"{where}: a `file:` of `project:` is not a string")
        yield Include(
            "project", _checked(file, where), project=_checked(project, where), via=via, job=job
        )
