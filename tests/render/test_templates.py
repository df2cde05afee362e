"""One place makes Jinja environments (bot/render/templates.py); pages and comments use it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.render import load_status, render_status, templates
from bot.render.templates import LOADER, TEMPLATES_DIR, Kind, environment, get_template, kind_of
from tests.builders import make_operation
from tests.pages import Pages

ROOT = Path(__file__).resolve().parents[2]
#: The product's packages (the simulators and the tests are not the product).
PRODUCT = ("bot", "webhooks", "jobs", "gitops_bot")
#: Jinja's environment classes, however imported (`Environment(...)`, `jinja2.Environment(...)`).
_ENVIRONMENTS = {
    "Environment",
    "SandboxedEnvironment",
    "ImmutableSandboxedEnvironment",
    "NativeEnvironment",
}


def _callee(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def environment_calls() -> Iterator[tuple[str, int]]:
    """Each call of a Jinja environment class in the product's sources: (file, line)."""
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and _callee(node) in _ENVIRONMENTS:
                    yield path.relative_to(ROOT).as_posix(), node.lineno


def test_exactly_one_place_constructs_a_jinja_environment() -> None:
    """The product calls `Environment(...)` once, in bot/render/templates.py; webhooks never."""
    calls = list(environment_calls())
    assert [file for file, _ in calls] == ["bot/render/templates.py"], calls


def test_the_scan_finds_environment_calls() -> None:
    """The scan itself sees the spellings a module would use."""
    source = "import jinja2\nfrom jinja2 import Environment\nEnvironment()\njinja2.Environment()\n"
    found = [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and _callee(node) in _ENVIRONMENTS
    ]
    assert found == [3, 4]


def test_every_kind_shares_the_one_loader_and_is_made_once() -> None:
    """Each kind's environment reads through LOADER over TEMPLATES_DIR and is cached."""
    assert LOADER.searchpath == [str(TEMPLATES_DIR)]
    for kind in Kind:
        assert environment(kind) is environment(kind)
        assert environment(kind).loader is LOADER
    assert environment(Kind.MARKDOWN) is not environment(Kind.HTML)


def test_kinds_come_from_the_template_names() -> None:
    """`.md.j2` is Markdown, `.html.j2` is HTML, anything else is refused."""
    assert kind_of("status_comment.md.j2") is Kind.MARKDOWN
    assert kind_of("pages/index.html.j2") is Kind.HTML
    with pytest.raises(ValueError, match="neither Markdown"):
        kind_of("notes.txt")


@pytest.mark.parametrize(
    ("kind", "name"),
    [(Kind.MARKDOWN, "pages/index.html.j2"), (Kind.HTML, "status_comment.md.j2")],
)
def test_a_template_loads_only_in_the_environment_of_its_kind(kind: Kind, name: str) -> None:
    """A Markdown template never renders without the inert rules, nor a page with them."""
    with pytest.raises(ValueError, match="is not for the"):
        environment(kind).get_template(name)


def test_a_page_and_a_status_comment_render_through_it(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status comment and a dashboard page both get their templates from get_template."""
    asked: list[str] = []
    real = templates.environment

    def spy(kind: Kind) -> jinja2.Environment:
        asked.append(kind)
        return real(kind)

    monkeypatch.setattr(templates, "environment", spy)
    op_id = make_operation(db, S.MERGING)
    view = load_status(db, op_id)
    assert view is not None
    assert "Merging" in render_status(view, "https://gitops.example.com")
    assert asked == [Kind.MARKDOWN]

    page = Pages.build(db).get(f"/changes/{op_id}")
    assert page.status_code == 200
    assert asked == [Kind.MARKDOWN, Kind.HTML]
    assert get_template("pages/change.html.j2").environment is real(Kind.HTML)
    assert get_template("status_comment.md.j2").environment is real(Kind.MARKDOWN)
