"""Where a repository schema's `$ref` may lead: inside the schema, or to another schema file of
the same repository at the same commit. Nothing else is ever fetched or read.

jsonschema's default registry retrieves `http(s)://` and `file://` references with urlopen
(redirects followed, no timeout), and its errors can quote what came back. The validators here
get a `referencing.Registry` the bot fills itself: each repository schema file is a resource
with a base URI of its own, `uri_of(path)` (under the reserved `.invalid` domain, so it names no
host anyone can own), and its relative references resolve against it as RFC 3986 says:
`common.json#/$defs/x` and `../shared/a.json` from `schemas/app.json` name `schemas/common.json`
and `shared/a.json`. `retrieve` turns such a URI back into a repository path and reads it with
the change's `read_schema` (at the commit its policy was recorded at); anything else -- another
scheme or host (`https://...`, `http://127.0.0.1:...`, `file:///etc/passwd`), an absolute `$id`
that moves its siblings onto such a host, a `urn:` no resource in the schema declares, a path
above the repository's root (the base URI's `/root/` segment is the root: `..` past it, or an
absolute `/path`, leaves it) -- is `RefRefused`, a problem naming the reference: never fetched,
never read, so no problem quotes anything from outside the repository.

Bounds, per change: at most MAX_REFERENCED schema files reached by `$ref`, each at most
MAX_SCHEMA_BYTES, each read, parsed and checked against its metaschema once, under the deadline
of the file whose check reached it. A `$ref` cycle is a RecursionError the checks report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import referencing
import referencing.jsonschema
from jsonschema.protocols import Validator

from bot.app.checks.budget import Deadline
from bot.app.checks.ecma_regex import shown
from bot.app.checks.keywords import (
    Run,
    bounded,
    current,
    dialect_of,
    format_checker,
    pattern_refused,
    running,
)
from bot.app.checks.syntax import SyntaxProblem, parse
from bot.core.paths import UnsafePath, normalise_path

#: The most schema files a change's schemas may reach by `$ref`.
MAX_REFERENCED = 20
#: The largest schema file read (the checks step reads no file larger either).
MAX_SCHEMA_BYTES = 512 * 1024
#: The base of every repository schema file's URI: the `/root/` segment is the repository's root.
REPOSITORY = "https://repository.invalid/root/"
_HOST = urlsplit(REPOSITORY)


class RefRefused(Exception):
    """A `$ref` the checks do not follow; the message says why, naming no fetched content."""


@dataclass(frozen=True, slots=True)
class Broken:
    """Why a schema file cannot be used, where (1-based), in its own words."""

    line: int
    column: int
    message: str


@dataclass(frozen=True, slots=True)
class SchemaFile:
    """A repository schema file that parsed and is a valid JSON Schema of its dialect."""

    path: str
    document: Any
    dialect: type[Validator]


def uri_of(path: str) -> str:
    """The base URI of the repository schema file at `path`."""
    return REPOSITORY + quote(path)


def path_of(uri: str) -> str:
    """The repository path `uri` names, or RefRefused saying why it names none."""
    try:
        split = urlsplit(uri)
    except ValueError:
        raise RefRefused("not a URI") from None
    if (split.scheme, split.netloc) != (_HOST.scheme, _HOST.netloc):
        raise RefRefused(
            f"outside this repository (references are never fetched): {shown(uri, 120)}"
        )
    if split.query:
        raise RefRefused("a query names no schema file")
    if not split.path.startswith(_HOST.path):
        raise RefRefused("above the repository's root (an absolute path, or `..` past the root)")
    try:
        return normalise_path(unquote(split.path[len(_HOST.path) :]))
    except UnsafePath as exc:
        raise RefRefused(f"not a path of this repository: it {exc.reason}") from None


def _size_of(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class SchemaFiles:
    """The schema files of one change's checks, each read once through `read`."""

    def __init__(self, read: Callable[[str], str | None], limit: int = MAX_REFERENCED) -> None:
        self._read = read
        self._limit = limit
        self._loaded: dict[str, SchemaFile | Broken] = {}
        self._referenced: set[str] = set()

    def load(self, path: str, deadline: Deadline) -> SchemaFile | Broken:
        """The schema file at `path`, or why it cannot be used."""
        if path not in self._loaded:
            self._loaded[path] = self._load(path, deadline)
        return self._loaded[path]

    def referenced(self, path: str, deadline: Deadline) -> SchemaFile:
        """The schema file a `$ref` names, or RefRefused: past the limit, missing or broken."""
        if path not in self._referenced:
            if len(self._referenced) >= self._limit:
                raise RefRefused(f"more than {self._limit} schema files referenced in one change")
            self._referenced.add(path)
        loaded = self.load(path, deadline)
        if isinstance(loaded, Broken):
            where = f"line {loaded.line} column {loaded.column}"
            raise RefRefused(f"{shown(path, 120)} {where}: {loaded.message}")
        return loaded

    def _load(self, path: str, deadline: Deadline) -> SchemaFile | Broken:
        text = self._read(path)
        if text is None:
            return Broken(1, 1, "the schema file does not exist")
        if _size_of(text) > MAX_SCHEMA_BYTES:
            return Broken(1, 1, f"the schema file is larger than {MAX_SCHEMA_BYTES} bytes")
        kind = path if path.lower().endswith((".yml", ".yaml")) else "schema.json"
        parsed = parse(kind, text, deadline)
        if isinstance(parsed, SyntaxProblem):
            return Broken(parsed.line, parsed.column, parsed.what[1])
        assert parsed is not None
        if len(parsed.documents) != 1:
            return Broken(1, 1, "a schema file holds one document")
        document = parsed.documents[0]
        dialect = dialect_of(document)
        broken = schema_error(document, dialect, deadline)
        if broken is not None:
            return Broken(1, 1, broken)
        return SchemaFile(path, document, dialect)

    def validator(self, root: SchemaFile) -> Any:
        """A bounded validator of `root`'s dialect whose `$ref`s resolve only as this module
        says, each repository file read through this change's files."""

        def retrieve(uri: str) -> referencing.Resource[Any]:
            found = self.referenced(path_of(uri), current().deadline)
            if found.dialect is not root.dialect:
                raise RefRefused(
                    f"{shown(found.path, 120)} is written in another JSON Schema dialect than "
                    f"{shown(root.path, 120)}"
                )
            return _resource(found)

        registry: referencing.Registry[Any] = referencing.Registry(retrieve=retrieve)  # type: ignore[call-arg]
        base = uri_of(root.path)
        resource = _resource(root)
        registry = registry.with_resource(base, resource).crawl()
        resolver = registry.resolver(base_uri=base).in_subresource(resource)
        cls: Any = bounded(root.dialect)
        return cls(
            root.document,
            registry=registry,
            _resolver=resolver,  # the base URI: jsonschema's own would be the schema's `$id` or ""
            format_checker=format_checker(root.dialect),
        )


def _resource(found: SchemaFile) -> referencing.Resource[Any]:
    """The file as a resource of its dialect (which its own `$schema` may name differently)."""
    dialect: Any = found.dialect
    dialect_id = str(dialect.ID_OF(dialect.META_SCHEMA))
    specification = referencing.jsonschema.specification_with(dialect_id)
    return specification.create_resource(found.document)


def schema_error(schema: Any, dialect: type[Validator], deadline: Deadline) -> str | None:
    """What makes `schema` not a JSON Schema of `dialect` (its metaschema's first word), or
    None; checked by a bounded validator under `deadline` (its formats too: a pattern RE2
    cannot run is named here)."""
    cls: Any = bounded(dialect)
    meta = cls(
        dialect.META_SCHEMA, format_checker=format_checker(dialect), registry=referencing.Registry()
    )
    try:
        with running(Run(deadline)):
            error = next(meta.iter_errors(schema), None)
    except RecursionError:  # a schema file is parsed at most syntax.MAX_DEPTH deep
        return "not a valid JSON Schema: nested too deeply"
    if error is None:
        return None
    refused = pattern_refused(error)
    if refused is not None:
        return refused
    message = error.message if len(error.message) <= 200 else error.message[:199] + "…"
    return f"not a valid JSON Schema: {message}"
