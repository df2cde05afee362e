"""The product's wheel ships bot, webhooks, jobs and gitops_bot with their templates and migrations,
none of the simulators (sim/), and the product imports and finds its templates without them.

The wheel is built with `pip wheel --no-deps` from a clean copy of the tree (a checkout's build/
may hold stale files that setuptools would put into the wheel). pip builds it in an isolated
environment, so setuptools and wheel must come from pip's configured index or cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitops_bot.cli import DEMO_NEEDS_SIM, main

ROOT = Path(__file__).resolve().parents[2]
#: The product's top-level packages: all that the wheel may install.
PRODUCT = ("bot", "webhooks", "jobs", "gitops_bot")
#: Top-level entries of a checkout that the build never reads.
NOT_BUILT = {"build", "dist", "artifacts", "tests", "docs"}
#: Python run in a fresh interpreter: `sim` cannot be imported, as where only the product is
#: installed; PRELUDE_PATH (a folder) is searched first.
PRELUDE = """
import importlib, json, pkgutil, sys
sys.path.insert(0, PRELUDE_PATH)


class NoSim:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "sim" or name.startswith("sim."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoSim)
"""


def _ignore(folder: str, names: list[str]) -> set[str]:
    """What not to copy: caches, environments, earlier builds, and what the build never reads."""
    top = Path(folder) == ROOT
    return {
        name
        for name in names
        if name == "__pycache__"
        or name.endswith(".egg-info")
        or (top and (name.startswith(".") or name in NOT_BUILT or ".sqlite3" in name))
    }


def _run(script: str, path: Path, cwd: Path) -> dict[str, Any]:
    """Runs PRELUDE + `script` (which prints one JSON line) in a fresh interpreter; its answer."""
    source = PRELUDE.replace("PRELUDE_PATH", repr(str(path))) + script
    done = subprocess.run(
        [sys.executable, "-I", "-c", source],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_the_wheel_ships_the_product_templates_and_migrations_and_no_sim(tmp_path: Path) -> None:
    """`pip wheel .` holds only the product's packages, every template and migration, no double."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_ignore)
    out = tmp_path / "wheel"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(src), "-w", str(out)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("gitops_bot-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        installed = tmp_path / "site"
        archive.extractall(installed)

    tops = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert tops == set(PRODUCT)
    parts = {part for name in names for part in name.split("/")}
    assert not parts & {"sim", "fakes", "gitlab_double", "demo.py"}, sorted(parts)

    templates = {
        "bot/templates/" + p.relative_to(ROOT / "templates").as_posix()
        for p in (ROOT / "templates").rglob("*")
        if p.is_file()
    }
    assert templates, "no templates in the checkout"
    assert templates <= names, sorted(templates - names)

    store = ROOT / "bot" / "store"
    migrations = {
        p.relative_to(ROOT).as_posix()
        for p in [store / "alembic.ini", *(store / "migrations").rglob("*")]
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert any("/versions/" in m for m in migrations), sorted(migrations)
    assert migrations <= names, sorted(migrations - names)

    # Installed (a pure wheel unpacks as it is), the product finds its templates there.
    answer = _run(
        """
from bot.render.templates import TEMPLATES_DIR, get_template
get_template("status_comment.md.j2")
get_template("help.md.j2")
get_template("pages/index.html.j2")
print(json.dumps({"templates": str(TEMPLATES_DIR), "bot": importlib.import_module("bot").__file__}))
""",
        installed,
        cwd=tmp_path,
    )
    assert Path(answer["bot"]).is_relative_to(installed), answer
    assert Path(answer["templates"]).is_relative_to(installed), answer


def test_every_product_module_imports_without_the_sim(tmp_path: Path) -> None:
    """A fresh interpreter that cannot import `sim` imports every module of the product."""
    answer = _run(
        f"""
imported, failed = [], {{}}
for top in {PRODUCT!r}:
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            importlib.import_module(info.name)
        except Exception as error:
            failed[info.name] = repr(error)
        else:
            imported.append(info.name)
where = {{top: sys.modules[top].__file__ for top in {PRODUCT!r}}}
print(json.dumps({{"imported": imported, "failed": failed, "where": where}}))
""",
        ROOT,
        cwd=tmp_path,
    )
    assert answer["failed"] == {}
    assert len(answer["imported"]) > 50, answer["imported"]
    for top, file in answer["where"].items():
        assert Path(file).is_relative_to(ROOT / top), (top, file)


def test_the_demo_without_the_sim_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitops-bot demo` where `sim` is not installed exits 1 with the way to get it, no trace."""
    monkeypatch.setitem(sys.modules, "sim", None)
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert DEMO_NEEDS_SIM in result.output
    assert "Traceback" not in result.output
