"""The `gitops-bot` command as an operator runs it."""

from __future__ import annotations

import os
import re
import selectors
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import inspect

from bot.core.diagram import mermaid
from bot.core.table import TABLE
from bot.store.engine import make_engine
from gitops_bot.cli import main
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_transitions_check_passes_on_the_shipped_table() -> None:
    """`gitops-bot transitions check` exits 0 and says how many transitions it checked."""
    result = CliRunner().invoke(main, ["transitions", "check"])
    assert result.exit_code == 0, result.output
    assert f"{len(TABLE)} transitions" in result.output


def test_transitions_check_fails_on_a_broken_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table with a dead end makes the check exit non-zero and name the fault."""
    from bot.core import checks

    broken = tuple(r for r in TABLE if r.target.value != "VALIDATED")
    monkeypatch.setattr(checks, "TABLE", broken)
    monkeypatch.setattr(checks.problems, "__defaults__", (broken,))
    result = CliRunner().invoke(main, ["transitions", "check"])
    assert result.exit_code == 1
    assert "VALIDATED: not reachable" in result.output


def test_transitions_prints_every_row_and_the_diagram() -> None:
    """The plain listing has one line per row; --mermaid prints the README's diagram."""
    listing = CliRunner().invoke(main, ["transitions"]).output
    assert len(listing.strip().splitlines()) == len(TABLE)
    assert "(new)" in listing
    assert CliRunner().invoke(main, ["transitions", "--mermaid"]).output == mermaid()


def test_db_upgrade_creates_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitops-bot db upgrade` creates every table on an empty SQLite database, twice safely."""
    url = f"sqlite:///{tmp_path / 'bot.sqlite3'}"
    monkeypatch.setenv("GITOPS_DATABASE_URL", url)
    for _ in range(2):
        result = CliRunner().invoke(main, ["db", "upgrade"])
        assert result.exit_code == 0, result.output
    engine = make_engine(url)
    tables = set(inspect(engine).get_table_names())
    engine.dispose()
    assert {"operations", "bindings", "audit_log", "outbox", "inbox", "flags"} <= tables


def test_worker_explains_it_needs_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without GITOPS_REDIS_URL the worker refuses clearly instead of starting on nothing."""
    monkeypatch.delenv("GITOPS_REDIS_URL", raising=False)
    result = CliRunner().invoke(main, ["worker", "--burst"])
    assert result.exit_code != 0
    assert "GITOPS_REDIS_URL" in result.output


def _start(argv: list[str], cwd: Path, port: int) -> subprocess.Popen[bytes]:
    """Starts a process as an operator would: no GITOPS_* settings, the venv on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITOPS_")}
    env["PORT"] = str(port)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@contextmanager
def running(argv: list[str], cwd: Path) -> Iterator[str]:
    """The process started, listening; its base URL; stopped on exit."""
    port = free_port()
    proc = _start(argv, cwd, port)
    try:
        wait_for_line(proc, "Listening at", deadline=time.monotonic() + 60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`gitops-bot serve` started as the README says, in an empty directory, no servers."""
    with running(["gitops-bot", "serve"], tmp_path) as base:
        yield base, tmp_path


def wait_for_line(proc: subprocess.Popen[bytes], needle: str, deadline: float) -> None:
    """Reads the process's output until a line contains `needle` (fails past the deadline)."""
    assert proc.stdout is not None
    seen: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            seen.append(line)
            if needle in line:
                return
    pytest.fail(f"no {needle!r} in time; output:\n{''.join(seen)}")


def test_serve_runs_on_the_embedded_default(served: tuple[str, Path]) -> None:
    """The README's run command answers health and readiness on SQLite with no servers."""
    base, workdir = served
    assert requests.get(f"{base}/healthz", timeout=20).json() == {"status": "ok"}
    ready = requests.get(f"{base}/readyz", timeout=5)
    assert ready.status_code == 200
    assert (workdir / "gitops-bot.sqlite3").exists()
    metrics = requests.get(f"{base}/metrics", timeout=5).text
    assert re.search(r"^gitops_outbox_pending 0\.0$", metrics, re.MULTILINE)


def test_procfile_web_line_serves_the_app(tmp_path: Path) -> None:
    """The Procfile's `web` line, run as written, upgrades the schema and answers readiness."""
    line = next(ln for ln in (ROOT / "Procfile").read_text().splitlines() if ln.startswith("web:"))
    argv = shlex.split(line.split(":", 1)[1])
    with running(argv, tmp_path) as base:
        ready = requests.get(f"{base}/readyz", timeout=20)
    assert ready.status_code == 200
    assert (tmp_path / "gitops-bot.sqlite3").exists()
