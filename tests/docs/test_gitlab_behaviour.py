"""The GitLab behaviour catalogue (docs/gitlab-behaviour.yaml) stays whole and true to the code:
the page is its rendering, every row is complete and names tests that exist, and every REST path
the bot calls has a row -- so a new GitLab call without a catalogue row fails here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.catalogue import AREAS, DATA, PAGE, REQUIRED, ROOT, load, render

#: Rows whose `tests` may still be empty (none now): a row added before its test is written
#: is named here until it has one; a row that has tests must not stay.
PENDING: set[str] = set()  # every row names the tests that show it

ROWS = load()
BOT = ROOT / "bot"
#: Where GitLab's REST API paths start; other literals starting with "/" are not GitLab calls.
API_ROOTS = ("/projects/", "/user", "/users/", "/version", "/personal_access_tokens", "/oauth/")
#: Expressions the bot builds its paths from, and the path each stands for.
PROJECT_PATH = "/projects/{}"
MR_PATH = "/projects/{}/merge_requests/{}"


def test_the_page_is_the_rendered_catalogue() -> None:
    """docs/gitlab-behaviour.md is exactly what `python -m tests.catalogue` writes."""
    assert PAGE.read_text(encoding="utf-8") == render(ROWS), (
        "docs/gitlab-behaviour.md is stale: run `python -m tests.catalogue`"
    )


@pytest.mark.parametrize("row", ROWS, ids=[str(r.get("id")) for r in ROWS])
def test_every_row_is_complete(row: dict[str, Any]) -> None:
    """id, area, behaviour, versions, source, bot and tests, none of them blank; a known area."""
    missing = [name for name in REQUIRED if name not in row]
    assert missing == [], f"{row.get('id')}: missing {missing}"
    for name in ("id", "area", "behaviour", "versions", "bot"):
        assert isinstance(row[name], str), f"{row['id']}: {name} is not text"
        assert row[name].strip(), f"{row['id']}: blank {name}"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", row["id"]), f"{row['id']}: not a slug"
    assert row["area"] in AREAS, f"{row['id']}: unknown area {row['area']!r}"
    assert isinstance(row["source"], list), f"{row['id']}: source must be a list"
    assert row["source"], f"{row['id']}: no source"
    assert all(isinstance(s, str) and s.strip() for s in row["source"])
    assert isinstance(row["tests"], list), f"{row['id']}: tests must be a list"
    assert isinstance(row.get("endpoints", []), list), f"{row['id']}: endpoints must be a list"


def test_ids_are_unique() -> None:
    """No two rows share an id (the ids are what other files and the PENDING set name)."""
    ids = [row["id"] for row in ROWS]
    assert sorted(i for i in set(ids) if ids.count(i) > 1) == []


def test_rows_without_tests_are_exactly_the_pending_ones() -> None:
    """An empty `tests` is allowed only for a PENDING row; a PENDING row that has tests now, or
    that no longer exists, must leave the set."""
    empty = {row["id"] for row in ROWS if not row["tests"]}
    assert empty - PENDING == set(), f"rows without tests, not PENDING: {sorted(empty - PENDING)}"
    assert PENDING - empty == set(), (
        f"PENDING rows that are done or gone: {sorted(PENDING - empty)}"
    )


def _functions(path: Path) -> set[str]:
    """`name` and `Class::name` of every function defined at the top of a test module or of
    its classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef):
            found.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return found


def test_every_listed_test_exists() -> None:
    """Each `path::test` (or `path::Class::test`) names a file and a function that are there."""
    missing: list[str] = []
    cache: dict[Path, set[str]] = {}
    for row in ROWS:
        for name in row["tests"]:
            path_text, _, function = str(name).partition("::")
            path = ROOT / path_text
            if not function or not path.is_file() or not path_text.startswith("tests/"):
                missing.append(f"{row['id']}: {name}")
                continue
            if function not in cache.setdefault(path, _functions(path)):
                missing.append(f"{row['id']}: {name}")
    assert missing == []


# -- every REST path the bot calls has a row ---------------------------------------------------


def _part(node: ast.expr) -> str:
    """What one `{...}` of an f-string stands for in a path."""
    if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name):
        return PROJECT_PATH if node.value.id in {"project", "self", "seen"} else "{}"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "mr_path"
    ):
        return MR_PATH
    if isinstance(node, ast.Attribute) and node.attr in {"gitlab_url", "public_url"}:
        return ""  # the instance's base URL: the path follows it
    return "{}"


def _template(node: ast.expr) -> str | None:
    """A string literal or f-string as a path template (every placeholder `{}`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.sub(r"\{[^{}]*\}", "{}", node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(_part(value.value))
        return "".join(parts)
    return None


def _api_path(template: str) -> str | None:
    """The REST path a template calls, or None when it is not a GitLab API path."""
    path = template.split("?", 1)[0]
    path = path.removeprefix("/api/v4")
    if any(c.isspace() for c in path):
        return None  # a message or docstring naming a path, not a path
    if path.startswith(API_ROOTS) or path in {root.rstrip("/") for root in API_ROOTS}:
        return path
    return None


def _bot_paths() -> Iterator[tuple[str, str]]:
    for source in sorted(BOT.rglob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        # an f-string's literal pieces are Constants too: read only the whole f-string
        pieces = {
            id(part)
            for node in ast.walk(tree)
            if isinstance(node, ast.JoinedStr)
            for part in node.values
        }
        for node in ast.walk(tree):
            if id(node) in pieces:
                continue
            if isinstance(node, ast.JoinedStr | ast.Constant):
                template = _template(node)
                path = _api_path(template) if template is not None else None
                if path is not None:
                    yield path, f"{source.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


def _normal(endpoint: str) -> str:
    """A row's "METHOD /path/:param" as the bot's templates are written: "/path/{}"."""
    path = endpoint.split()[-1]
    return re.sub(r":\w+", "{}", path)


BOT_PATHS = dict(_bot_paths())
COVERED = {_normal(str(e)) for row in ROWS for e in row.get("endpoints") or []}


def test_the_scan_finds_the_calls_it_must() -> None:
    """The scan sees paths written each way the bot writes them (so it cannot pass by seeing
    nothing): a literal, an f-string on the project's path, one on the MR's path, a helper's."""
    for expected in (
        "/version",
        "/projects/{}/merge_requests/{}/approve",
        "/projects/{}/repository/compare",
        "/projects/{}/merge_requests/{}/notes/{}/award_emoji",
        "/projects/{}/protected_branches/{}",
        "/oauth/token",
        "/user",
    ):
        assert expected in BOT_PATHS, f"the scan missed {expected}; it found {sorted(BOT_PATHS)}"


def test_every_rest_path_the_bot_calls_has_a_row() -> None:
    """A path template in bot/ that no row's `endpoints` covers is a GitLab call nobody has
    looked up: add a row to docs/gitlab-behaviour.yaml (with GitLab's source) for it."""
    uncovered = sorted(
        f"{path} ({where})" for path, where in BOT_PATHS.items() if path not in COVERED
    )
    assert uncovered == [], f"REST paths without a catalogue row in {DATA.name}: {uncovered}"


def test_every_endpoint_a_row_names_is_well_formed() -> None:
    """Endpoints read "METHOD /path" with an HTTP method the bot uses."""
    methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
    bad = [
        f"{row['id']}: {e}"
        for row in ROWS
        for e in row.get("endpoints") or []
        if len(str(e).split()) != 2
        or str(e).split()[0] not in methods
        or not str(e).split()[1].startswith("/")
    ]
    assert bad == []


def test_the_check_items_flag_is_off_and_says_it_is_not_gitlabs() -> None:
    """The approve call's check items (`approve.impl=direct`, POSTed to /approval_check_items)
    are an approval gateway's API, not GitLab's: the flag defaults to GitLab's own approve, and
    the flag's definition and the README say so where the flag is documented."""
    from bot.store.flags import DEFAULTS

    assert DEFAULTS["approve.impl"] == "python-gitlab"
    flags_source = (ROOT / "bot" / "store" / "flags.py").read_text()
    assert "which is NOT a GitLab API" in flags_source
    readme = (ROOT / "README.md").read_text()
    said = (
        "`approve.impl=direct` sends check items to `/approval_check_items`, which is not a"
        " GitLab API"
    )
    assert said in " ".join(readme.split())
