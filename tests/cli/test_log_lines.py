"""The processes as an operator starts them write JSON lines to a pipe, each naming its role:
gunicorn's own lines and the migration's included."""

from __future__ import annotations

import json
import os
import selectors
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cli.test_cli import ROOT
from tests.ports import free_port


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITOPS_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | extra


def _lines_until(argv: list[str], cwd: Path, env: dict[str, str], needle: str) -> list[str]:
    """The process's output lines up to the one containing `needle`, then it is stopped and
    the rest is read too."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline and sel.select(deadline - time.monotonic()):
                line = proc.stdout.readline().decode(errors="replace")
                if not line:
                    break
                seen.append(line)
                if needle in line:
                    break
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
    assert any(needle in line for line in seen), "".join(seen)
    return seen + rest.decode(errors="replace").splitlines()


def _parsed(lines: list[str]) -> list[dict[str, Any]]:
    """Every non-empty line parsed as JSON (one that is not fails the test)."""
    return [json.loads(line) for line in lines if line.strip()]


def test_the_procfile_web_line_writes_json_lines_with_role_web(tmp_path: Path) -> None:
    """gunicorn run as the Procfile says: its lines (booting, listening), Alembic's and the
    bot's are JSON with role web, and a worker's pid differs from the master's."""
    line = next(ln for ln in (ROOT / "Procfile").read_text().splitlines() if ln.startswith("web:"))
    argv = shlex.split(line.split(":", 1)[1])
    env = _env(PORT=str(free_port()), WEB_CONCURRENCY="1")
    parsed = _parsed(_lines_until(argv, tmp_path, env, "Booting worker"))
    assert {entry["role"] for entry in parsed} == {"web"}
    loggers = {entry["logger"] for entry in parsed}
    assert "gunicorn.error" in loggers
    assert any(name.startswith("alembic") for name in loggers)
    booting = next(e for e in parsed if e["event"].startswith("Booting worker"))
    listening = next(e for e in parsed if e["event"].startswith("Listening at"))
    assert booting["level"] == listening["level"] == "info"
    assert booting["pid"] == int(booting["event"].rsplit(" ", 1)[1]) != listening["pid"]


def test_the_worker_command_writes_json_lines_with_role_worker(tmp_path: Path) -> None:
    """`gitops-bot worker` with its output on a pipe: its startup warning is a JSON line with
    role worker (whatever then happens to Redis)."""
    env = _env(
        GITOPS_DATABASE_URL=f"sqlite:///{tmp_path / 'bot.sqlite3'}",
        GITOPS_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",  # nobody listens: it stops
    )
    lines = _lines_until(["gitops-bot", "worker", "--burst"], tmp_path, env, "GITOPS_PROJECTS")
    warning = json.loads(next(line for line in lines if "GITOPS_PROJECTS" in line))
    assert (warning["role"], warning["level"], warning["logger"]) == (
        "worker",
        "warning",
        "gitops_bot.runner",
    )
