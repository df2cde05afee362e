"""The import rules the README's "Layout" section draws, enforced on the sources.

Data flows one way: entry points (webhooks, jobs, gitops_bot) -> use cases (bot/app) -> pure
decisions (bot/core), the store (bot/store) and the adapters to GitLab and the approval system.
Every import in the product, at module level or inside a function, is read with `ast` and checked
against the table below; a new arrow that runs back up fails here, naming the file and the line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "webhooks", "jobs", "gitops_bot")
#: Every package of the project, product or not: an import of one of these is checked.
OURS = (*PRODUCT, "sim", "tests")

#: The small shared kernel every layer may use: settings, error types, metrics, the queue's port,
#: the running step's heartbeat, the log lines' format and bound keys.
KERNEL = ("bot.config", "bot.errors", "bot.metrics", "bot.queueing", "bot.heartbeat", "bot.logs")

#: Layer -> the layers of ours it may import (besides itself). Longest prefix wins.
ALLOWED: dict[str, tuple[str, ...]] = {
    # pure decisions: the state machine, guards, identities, path rules; no I/O of any kind
    "bot.core": ("bot.errors",),
    # the adapters: each talks to one outside system and decides nothing about the workflow
    "bot.store": ("bot.core", *KERNEL),
    "bot.gitlab": ("bot.core", "bot.approval.backoff", *KERNEL),
    "bot.approval": ("bot.core", *KERNEL),
    # the repository's policy file (.gitops/bot.yml): its model and parsing, no I/O
    "bot.policy": ("bot.core", *KERNEL),
    # API submitters' callback receivers, signed as the approval system signs to us
    "bot.notify": ("bot.core", "bot.approval.callback", *KERNEL),
    # GitLab as the dashboard's identity provider: the OAuth token exchange and who signed in
    "bot.oauth": ("bot.core", *KERNEL),
    # deliveries in (parsing, storing, the ack path's group commit) and text out
    "bot.ingress": ("bot.core", "bot.store", *KERNEL),
    "bot.render": ("bot.core", "bot.store", "bot.gitlab.notes", *KERNEL),
    # the services a process runs on: the adapters' clients, built by the wiring
    "bot.services": ("bot.store", "bot.gitlab", "bot.approval", *KERNEL),
    "bot.config": ("bot.core", "bot.errors"),
    "bot.errors": (),
    "bot.metrics": (),
    "bot.queueing": ("bot.errors",),
    "bot.heartbeat": (),
    "bot.logs": ("bot.config",),
    # the use cases: everything in bot, nothing above it
    "bot.app": ("bot",),
    # entry points: each calls the use cases, none calls another entry point
    "jobs": ("bot",),
    "webhooks": ("bot",),
    "gitops_bot": ("bot", "jobs", "webhooks"),
}

#: Third-party libraries that belong to one layer: anywhere else they are a leak of that layer.
ONLY_IN: dict[str, tuple[str, ...]] = {
    "sqlalchemy": ("bot.store", "gitops_bot.wiring"),
    "rq": ("jobs",),
    "flask": ("webhooks", "gitops_bot.runner", "gitops_bot.wsgi"),
    "gitlab": ("bot.gitlab",),
    "requests": ("bot.gitlab", "bot.approval", "bot.notify", "bot.oauth"),
    "jinja2": ("bot.render",),
}

#: The one place the product reaches the simulators: `gitops-bot demo`, lazily, with a clear
#: message when they are not installed (tests/unit/test_packaging.py runs it without them).
SIM_ALLOWED = {"gitops_bot.cli"}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted
    where: str  # file:line


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> list[Import]:
    found: list[Import] = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:  # alembic's revision scripts: SQL by definition
                continue
            module = _module_name(path)
            rel = path.relative_to(ROOT)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found += [
                        Import(module, alias.name, f"{rel}:{node.lineno}") for alias in node.names
                    ]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:  # `from bot import metrics` imports bot.metrics
                        target = f"{node.module}.{alias.name}"
                        if node.module.split(".")[0] not in OURS:
                            target = node.module
                        found.append(Import(module, target, f"{rel}:{node.lineno}"))
                elif isinstance(node, ast.ImportFrom) and node.level:
                    raise AssertionError(f"{rel}:{node.lineno}: relative import; write it in full")
    return found


IMPORTS = _imports()


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(module: str) -> str:
    matches = [layer for layer in ALLOWED if _within(module, layer)]
    assert matches, f"{module} belongs to no layer of the README's Layout: add it to ALLOWED"
    return max(matches, key=len)


def _ours(target: str) -> bool:
    return target.split(".")[0] in OURS


def test_the_rules_cover_every_module_and_see_a_real_graph() -> None:
    """Every product module is in a layer, and the graph is the real one (not an empty scan)."""
    modules = {i.module for i in IMPORTS}
    for module in modules:
        _layer(module)
    assert len(modules) > 100
    assert any(i.module == "jobs.drive" and _within(i.target, "bot.app") for i in IMPORTS)


def test_no_arrow_runs_back_up() -> None:
    """Each layer imports only the layers below it: no use case imports an entry point, no
    adapter imports a use case, no entry point imports another one."""
    wrong = []
    for imp in IMPORTS:
        if not _ours(imp.target) or imp.target.split(".")[0] in ("sim", "tests"):
            continue
        layer = _layer(imp.module)
        allowed = (layer, *ALLOWED[layer])
        if not any(_within(imp.target, ok) for ok in allowed):
            wrong.append(f"{imp.where}: {imp.module} ({layer}) imports {imp.target}")
    assert wrong == []


def test_the_core_is_pure() -> None:
    """bot/core decides from values alone: the standard library, RE2 and itself, no I/O library."""
    stdlib = {
        "__future__", "base64", "binascii", "collections", "dataclasses", "datetime", "enum",
        "fnmatch", "functools", "hashlib", "html", "ipaddress", "itertools", "json", "math",
        "posixpath", "re", "string", "types", "typing", "unicodedata",
    }  # fmt: skip
    pure_modules = {"urllib.parse"}  # of a package that also does I/O (urllib.request)
    pure_libraries = {"re2"}  # a regex engine like `re`, linear-time (bot/core/path_policy.py)
    wrong = [
        f"{imp.where}: {imp.target}"
        for imp in IMPORTS
        if _layer(imp.module) == "bot.core"
        and not _ours(imp.target)
        and imp.target.split(".")[0] not in stdlib | pure_libraries
        and imp.target not in pure_modules
    ]
    assert wrong == []


@pytest.mark.parametrize("library", sorted(ONLY_IN))
def test_each_outside_library_stays_in_its_layer(library: str) -> None:
    """SQL only in the store (and the wiring that opens the engine), RQ only in the jobs, Flask
    only in the web entry point, python-gitlab and requests only in the adapters, Jinja only in
    the renderer."""
    homes = ONLY_IN[library]
    wrong = [
        f"{imp.where}: {imp.module} imports {imp.target}"
        for imp in IMPORTS
        if _within(imp.target, library) and not any(_within(imp.module, h) for h in homes)
    ]
    assert wrong == []


def test_the_product_never_imports_the_simulators_or_the_tests() -> None:
    """The doubles are not shipped: only `gitops-bot demo` reaches for them, lazily."""
    wrong = [
        f"{imp.where}: {imp.module} imports {imp.target}"
        for imp in IMPORTS
        if (_within(imp.target, "tests"))
        or (_within(imp.target, "sim") and imp.module not in SIM_ALLOWED)
    ]
    assert wrong == []
