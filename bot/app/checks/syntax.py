"""The syntax of a changed file, by its extension: YAML, JSON, TOML; with where it breaks.

YAML is read with the safe loader and no more than MAX_NODES nodes once its aliases are
expanded, so a "billion laughs" file is a problem, not a worker stuck walking it.

No file nests its mappings and arrays (objects, tables) deeper than MAX_DEPTH: the parsers and
what walks their result later (the JSON Schema validator, the positions) recurse, and a deep file
must be a problem at a line and column, not a RecursionError that ends the change "unexpected".
The depth is bounded before each parser could recurse: YAML while composing (and again for what
aliases expand to), JSON and TOML by a scan of their brackets outside strings and comments; TOML's
tables and dotted keys, which nest without brackets, are measured once parsed.

Whatever the text, `parse` returns a parse or a SyntaxProblem with a line and column, never an
exception: a value a parser cannot make (an invalid YAML date such as `2023-02-30`, an integer
past Python's 4,300 digits in YAML, JSON or TOML, a YAML float past a float's range, a `!!bool`
that is none) is a problem at its node or its first digit (bot/policy/parse.py's loader makes
the YAML ones). Parsing asks the file's deadline (bot/app/checks/budget.py) at every YAML node
composed, every bracket scanned and every node measured; when it is spent the file is a problem
saying it was not checked.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from bot.app.checks.budget import Deadline, OutOfTime, no_deadline
from bot.ingress.jsonload import depth
from bot.policy.parse import DepthLimitedLoader, reader_problem

#: The most nodes a YAML file may hold with every alias expanded.
MAX_NODES = 100_000
#: The deepest a changed file's mappings and arrays may nest (configuration rarely passes 15;
#: 64 keeps the JSON Schema validator, a few frames a level, far inside the recursion limit).
MAX_DEPTH = 64
#: The longest problem message (a parser's may quote the file).
MAX_MESSAGE = 200
_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
#: What a bracket scan steps over: strings (and TOML's comments), whose brackets nest nothing.
_BRACKET = r"[\[\]{}]"
_JSON_SKIP = (r'"(?:[^"\\]|\\.)*"',)  # a string
_TOML_SKIP = (
    r"#[^\n]*",  # a comment
    r'"""(?:[^\\]|\\.)*?"""',  # a multi-line basic string
    r"'''.*?'''",  # a multi-line literal string
    r'"(?:[^"\\\n]|\\.)*"',  # a basic string
    r"'[^'\n]*'",  # a literal string
)
_TOKENS = {
    "json": re.compile("|".join((*_JSON_SKIP, _BRACKET)), re.DOTALL),
    "toml": re.compile("|".join((*_TOML_SKIP, _BRACKET)), re.DOTALL),
}
#: A number past what Python converts (json, tomllib and PyYAML raise a plain ValueError), outside
#: strings and comments: the first such run of digits is where the problem is.
_DIGITS = sys.get_int_max_str_digits()
_LONG_NUMBER = {
    "json": re.compile("|".join((*_JSON_SKIP, rf"(\d{{{_DIGITS + 1},}})")), re.DOTALL),
    "toml": re.compile("|".join((*_TOML_SKIP, rf"([0-9a-fA-F_]{{{_DIGITS + 1},}})")), re.DOTALL),
}
_TOO_LONG = f"an integer of more than {_DIGITS} digits"

_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
_TOML_END = "(at end of document)"
_KINDS = {".yml": "yaml", ".yaml": "yaml", ".json": "json", ".toml": "toml"}


@dataclass(frozen=True, slots=True)
class Parsed:
    """A file that parsed: its kind, its documents, and what positions are found from (YAML:
    each document's composed node; JSON: the text)."""

    kind: str
    documents: list[Any]
    nodes: list[yaml.Node]
    text: str


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    """Where the file stops parsing (1-based) and (validator, message)."""

    line: int
    column: int
    what: tuple[str, str]


def kind_of(path: str) -> str | None:
    """ "yaml", "json" or "toml" by the path's extension; None for any other file."""
    lower = path.lower()
    return next((kind for ext, kind in _KINDS.items() if lower.endswith(ext)), None)


def parse(path: str, text: str, deadline: Deadline | None = None) -> Parsed | SyntaxProblem | None:
    """The file parsed, where it fails to, or None when no parser applies to its extension.
    Past `deadline`, a problem saying the file was not checked."""
    kind = kind_of(path)
    if kind is None:
        return None
    if "\x00" in text:
        return SyntaxProblem(1, 1, (kind, "not UTF-8 text"))
    deadline = deadline or no_deadline()
    try:
        parsed = _parse(kind, text, deadline)
    except OutOfTime as exc:
        return SyntaxProblem(1, 1, (kind, str(exc)))
    if isinstance(parsed, SyntaxProblem) and len(parsed.what[1]) > MAX_MESSAGE:
        # a parser's words may quote the file (a tag of megabytes): cut, like a preview line
        cut = parsed.what[1][: MAX_MESSAGE - 1] + "…"
        return SyntaxProblem(parsed.line, parsed.column, (parsed.what[0], cut))
    return parsed


def _parse(kind: str, text: str, deadline: Deadline) -> Parsed | SyntaxProblem:
    if kind == "yaml":
        return _yaml(text, deadline)
    too_deep = _bracket_depth(kind, text, deadline)
    if too_deep is not None:
        return too_deep
    if kind == "toml":
        return _toml(text)
    try:
        return Parsed("json", [json.loads(text)], [], text)
    except json.JSONDecodeError as exc:
        return SyntaxProblem(exc.lineno, exc.colno, ("json", exc.msg))
    except RecursionError:  # not expected past the bracket scan; a problem all the same
        return SyntaxProblem(1, 1, ("json", _TOO_DEEP))
    except ValueError:  # an integer longer than Python converts
        return _long_number("json", text)


def _long_number(kind: str, text: str) -> SyntaxProblem:
    """The problem of a number too long to convert, at its first digit when it is found."""
    for token in _LONG_NUMBER[kind].finditer(text):
        if token.lastindex:
            return SyntaxProblem(*_line_column(text, token.start()), (kind, _TOO_LONG))
    return SyntaxProblem(1, 1, (kind, _TOO_LONG))


def _bracket_depth(kind: str, text: str, deadline: Deadline) -> SyntaxProblem | None:
    """Where `text`'s brackets first nest deeper than MAX_DEPTH (outside strings and comments;
    unbalanced ones are left to the parser), or None."""
    level = 1 if kind == "toml" else 0  # a TOML document is a table
    for count, token in enumerate(_TOKENS[kind].finditer(text)):
        if count % 1024 == 0:
            deadline.check()
        bracket = token.group()
        if bracket in ("[", "{"):
            level += 1
            if level > MAX_DEPTH:
                line, column = _line_column(text, token.start())
                return SyntaxProblem(line, column, (kind, _TOO_DEEP))
        elif bracket in ("]", "}"):
            level = max(level - 1, 0)  # a stray closer is the parser's to report
    return None


def _line_column(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _toml(text: str) -> Parsed | SyntaxProblem:
    try:
        document = tomllib.loads(text)
    except RecursionError:  # not expected past the bracket scan; a problem all the same
        return SyntaxProblem(1, 1, ("toml", _TOO_DEEP))
    except ValueError as exc:
        if not isinstance(exc, tomllib.TOMLDecodeError):  # a number longer than Python converts
            return _long_number("toml", text)
        message = str(exc)
        at = _TOML_AT.search(message)
        if at is not None:
            line, column = int(at.group(1)), int(at.group(2))
        elif _TOML_END in message:  # where the text ends
            line, column = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
        else:
            line, column = 1, 1
        message = _TOML_AT.sub("", message.replace(_TOML_END, "")).strip()
        return SyntaxProblem(line, column, ("toml", message))
    if depth(document) > MAX_DEPTH:  # tables and dotted keys nest without brackets
        return SyntaxProblem(1, 1, ("toml", _TOO_DEEP))
    return Parsed("toml", [document], [], text)


class _Loader(DepthLimitedLoader):
    """The safe loader, at most MAX_DEPTH deep as composed; what aliases expand to is measured
    by the caller (see _too_big)."""

    max_depth = MAX_DEPTH


def _yaml(text: str, deadline: Deadline) -> Parsed | SyntaxProblem:
    try:
        return _documents(text, deadline)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        return SyntaxProblem(line, column, ("yaml", message or "invalid YAML"))
    except yaml.reader.ReaderError as exc:
        line, column, message = reader_problem(exc, text)
        return SyntaxProblem(line, column, ("yaml", message))
    except (yaml.YAMLError, RecursionError) as exc:
        return SyntaxProblem(1, 1, ("yaml", str(exc).splitlines()[0] or "invalid YAML"))
    except (ValueError, ArithmeticError, LookupError, TypeError, AttributeError) as exc:
        # a safe constructor's failure outside any one node (a merge of what is no mapping)
        return SyntaxProblem(1, 1, ("yaml", f"not valid YAML ({type(exc).__name__})"))


def _documents(text: str, deadline: Deadline) -> Parsed | SyntaxProblem:
    """Every document of `text`, or the problem that stops them (raises what PyYAML raises)."""
    loader = _Loader(text)  # its reader refuses a control character here already
    loader.out_of_time = lambda: deadline.why if deadline.spent() else None
    documents: list[Any] = []
    nodes: list[yaml.Node] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            too_big = _too_big(node, deadline)
            if too_big is not None:
                return too_big
            nodes.append(node)
            documents.append(loader.construct_document(node))
    finally:
        loader.dispose()
    return Parsed("yaml", documents, nodes, text)


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


def _problem(node: yaml.Node, message: str) -> SyntaxProblem:
    return SyntaxProblem(node.start_mark.line + 1, node.start_mark.column + 1, ("yaml", message))


def _too_big(root: yaml.Node, deadline: Deadline) -> SyntaxProblem | None:
    """Why a composed document is too big once its aliases are expanded: more than MAX_NODES
    nodes (a cycle counts as too many), or deeper than MAX_DEPTH (aliases can nest what the
    composer's own bound never saw); None when it is neither. Walked with a stack of its own,
    each anchored node measured once."""
    too_many = f"more than {MAX_NODES} nodes once its aliases are expanded"
    memo: dict[int, tuple[int, int]] = {}  # node id -> (nodes, depth) with aliases expanded
    # the containers being walked (the stack's length is the depth of the last): each with
    # its children still to visit and [nodes, depth below it] so far
    stack: list[tuple[yaml.Node, Iterator[yaml.Node], list[int]]] = [
        (root, _children(root), [1, 0])
    ]
    walking = {id(root)}
    while stack:
        deadline.check()
        node, children, measured = stack[-1]
        child = next(children, None)
        if child is None:  # `node` is measured: it counts in its parent's measure
            stack.pop()
            walking.discard(id(node))
            size = memo[id(node)] = (measured[0], measured[1] + 1)
            if not stack:
                return None
            measured = stack[-1][2]
        elif id(child) in walking:
            return _problem(root, too_many)  # an alias of a node inside itself: no end
        elif not isinstance(child, yaml.MappingNode | yaml.SequenceNode):
            size = (1, 0)
        elif id(child) in memo:  # an alias of a node measured before
            size = memo[id(child)]
            if len(stack) + size[1] > MAX_DEPTH:
                return _problem(node, _TOO_DEEP)
        elif len(stack) >= MAX_DEPTH:
            return _problem(child, _TOO_DEEP)
        else:
            stack.append((child, _children(child), [1, 0]))
            walking.add(id(child))
            continue
        measured[0] += size[0]
        measured[1] = max(measured[1], size[1])
        if measured[0] > MAX_NODES:
            return _problem(root, too_many)
    return None
