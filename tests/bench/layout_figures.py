"""Figures of the code's shape (issue 13): where SQL is written, big files, long functions.

Usage: .venv/bin/python -m tests.bench.layout_figures [--root DIR] [--list]

Counts over the product's Python files tracked by git (bot, webhooks, jobs, gitops_bot; not
tests, scripts or the simulators): modules outside bot/store that import SQLAlchemy (any import,
and those that build statements, i.e. import more than `sqlalchemy.engine` types), files over 350
lines, functions over 60 lines, and the product's lines.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot/", "webhooks/", "jobs/", "gitops_bot/")


def product_files(root: Path) -> list[str]:
    """The product's tracked .py files (the simulators excluded wherever they live)."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "*.py"], capture_output=True, text=True, check=True
    ).stdout.split()
    return [f for f in listed if f.startswith(PRODUCT) and "/fakes/" not in f]


def _sqlalchemy_imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "sqlalchemy"}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "sqlalchemy"
        ):
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def figures(root: Path) -> dict[str, list[str]]:
    """Each figure's offenders."""
    any_sql: list[str] = []
    building: list[str] = []
    big: list[str] = []
    long_functions: list[str] = []
    lines = 0
    for name in product_files(root):
        source = (root / name).read_text()
        tree = ast.parse(source)
        count = len(source.splitlines())
        lines += count
        if count > 350:
            big.append(f"{name} ({count})")
        if not name.startswith("bot/store/"):
            imported = _sqlalchemy_imports(tree)
            if imported:
                any_sql.append(name)
            if any(not i.startswith("sqlalchemy.engine.") for i in imported):
                building.append(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long_functions.append(f"{name}:{node.name} ({length})")
    return {
        "modules outside bot/store importing SQLAlchemy": any_sql,
        "of which building statements (more than sqlalchemy.engine types)": building,
        "files over 350 lines": big,
        "functions over 60 lines": long_functions,
        "product lines": [str(lines)],
    }


def main() -> None:
    """Prints the figures (with `--list`, each offender)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    for title, items in figures(args.root).items():
        value = items[0] if title == "product lines" else str(len(items))
        print(f"{title}: {value}")
        if args.list and title != "product lines":
            for item in items:
                print(f"  {item}")


if __name__ == "__main__":
    main()
