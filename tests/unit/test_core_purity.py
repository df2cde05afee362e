"""bot/core stays pure: no IO library is imported anywhere in it."""

from __future__ import annotations

import ast
from pathlib import Path

import bot.core

FORBIDDEN = {
    "sqlalchemy",
    "gitlab",
    "requests",
    "flask",
    "rq",
    "rq_scheduler",
    "redis",
    "fakeredis",
    "psycopg",
    "socket",
    "http",
    "urllib",
    "subprocess",
    "alembic",
    "prometheus_client",
    "jobs",
    "webhooks",
}
#: Modules of a forbidden package that only parse strings (no I/O): allowed by their full name.
PURE_SUBMODULES = {"urllib.parse"}


def _root(name: str) -> str:
    return name if name in PURE_SUBMODULES else name.split(".")[0]


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots.update(_root(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(_root(node.module))
            if node.module == "bot" or (
                node.module.startswith("bot.") and not node.module.startswith("bot.core")
            ):
                roots.add(node.module)
    return roots


def test_core_imports_no_io_library() -> None:
    """No module in bot/core imports a database, HTTP, queue or web library, or bot's shell."""
    core = Path(bot.core.__file__).parent
    offenders = {}
    for path in sorted(core.rglob("*.py")):
        bad = {r for r in _imported_roots(path) if r in FORBIDDEN or r.startswith("bot.")}
        if bad:
            offenders[path.name] = sorted(bad)
    assert offenders == {}


def test_purity_check_catches_an_io_import(tmp_path: Path) -> None:
    """The check itself notices a forbidden import (so the test above can fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sqlalchemy\nfrom bot.store import fire\nfrom urllib.request import urlopen\n"
    )
    assert {"sqlalchemy", "bot.store", "urllib"} <= _imported_roots(bad)
