"""The Procfile's web process for a test: a real gunicorn with the production config, on a free
port, with the GITOPS_* settings the test gives (and none of the caller's)."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
#: Seconds gunicorn may take to listen and its worker to answer /readyz on a busy machine.
READY_WITHIN = 60.0


@dataclass
class WebProcess:
    """The running gunicorn: its port and what it logged so far."""

    port: int
    log: list[str]

    @property
    def url(self) -> str:
        """Where it answers."""
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        """A raw TCP connection to the server."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


@contextlib.contextmanager
def web_process(settings: dict[str, str]) -> Iterator[WebProcess]:
    """`gunicorn --config python:webhooks.gunicorn_conf 'gitops_bot.wsgi:create_app()'` with
    `settings` (GITOPS_*, WEB_*), answering /readyz, until the block ends."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITOPS_", "WEB_", "PORT"))}
    env.update(PORT=str(port), GITOPS_BIND="127.0.0.1", PYTHONUNBUFFERED="1", **settings)
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    proc = subprocess.Popen(
        [gunicorn, "--config", "python:webhooks.gunicorn_conf", "gitops_bot.wsgi:create_app()"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    stderr = proc.stderr
    log: list[str] = []
    listening = threading.Event()

    def pump() -> None:
        for line in stderr:
            log.append(line)
            if "Listening at" in line:
                listening.set()
        listening.set()

    reader = threading.Thread(target=pump, name="gunicorn-log", daemon=True)
    reader.start()
    try:
        assert listening.wait(READY_WITHIN), "".join(log)
        assert proc.poll() is None, "".join(log)
        # the socket listens from here on; the request waits until the worker has booted
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=READY_WITHIN)
        try:
            conn.request("GET", "/readyz")
            status = conn.getresponse().status
        finally:
            conn.close()
        assert status == 200, "".join(log)
        yield WebProcess(port, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=10)
        stderr.close()


@contextlib.contextmanager
def served_gitlab(project: str = "platform/config") -> Iterator[dict[str, str]]:
    """A GitLab double on a free local port holding `project` (its default branch protected,
    as GitLab does) with the author bot a Maintainer: the settings that point a web process at
    it. A submission's target branch is read from GitLab before anything is recorded."""
    from sim.gitlab import GitLabDouble

    double = GitLabDouble("http://gitlab.local", mode="new")
    double.add_project(project, files={"config/prod.yaml": "replicas: 1\n"})
    double.add_user("gitops-bot", token="served-author-token", access={project: 40})
    with double.serve() as url:
        yield {"GITOPS_GITLAB_URL": url, "GITOPS_GITLAB_TOKEN": "served-author-token"}
