"""The Procfile's processes as real OS processes: start, wait until ready, kill, restart, stop.

Each process runs in its own session (process group), logs to a file, and is found again by
name. Commands come from the Procfile itself, with the executables taken from this venv.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import requests
from redis import Redis

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def procfile() -> dict[str, list[str]]:
    """The Procfile's commands by process type, with this venv's executables."""
    commands: dict[str, list[str]] = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if ":" not in line or line.lstrip().startswith("#"):
            continue
        kind, command = line.split(":", 1)
        argv = shlex.split(command)
        local = BIN / argv[0]
        commands[kind.strip()] = [str(local) if local.exists() else argv[0], *argv[1:]]
    return commands


def wait_until(
    check: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> object:
    """Calls `check` until it returns something true, or fails after `timeout` seconds.

    The pause between looks is for other OS processes to make progress (nothing in this
    process is waited for here).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def holds_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    """Asserts that `check` stays true for `seconds` while other processes run on."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), f"no longer true: {what}"
        time.sleep(0.1)


@dataclass
class Proc:
    """One running process of the cluster."""

    name: str
    kind: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        """The process id (the group leader's: gunicorn's master, the RQ worker)."""
        return self.popen.pid

    def alive(self) -> bool:
        """Whether it is still running."""
        return self.popen.poll() is None


class Cluster:
    """web (gunicorn) and worker (`gitops-bot worker`) instances and one scheduler, on one env."""

    def __init__(self, env: Mapping[str, str], logs: Path, redis: Redis) -> None:
        base = {
            k: v for k, v in os.environ.items() if not k.startswith(("GITOPS_", "WEB_", "PORT"))
        }
        self.env = {**base, "PYTHONUNBUFFERED": "1", **env}
        self.logs = logs
        self.redis = redis
        self.procs: dict[str, Proc] = {}
        self.commands = procfile()
        self.retired: list[Proc] = []

    # -- starting ----------------------------------------------------------------------------

    def _spawn(self, name: str, kind: str, extra_env: Mapping[str, str] | None = None) -> Proc:
        env = {**self.env, **(extra_env or {})}
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        argv = self.commands[kind]
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        proc = Proc(name, kind, argv, env, log, popen)
        self.procs[name] = proc
        return proc

    def start_web(self, name: str, port: int) -> str:
        """A gunicorn `web` on 127.0.0.1:port (not waited for); its base URL."""
        self._spawn(name, "web", {"PORT": str(port), "GITOPS_BIND": "127.0.0.1"})
        return f"http://127.0.0.1:{port}"

    def start_worker(self, name: str, env: Mapping[str, str] | None = None) -> Proc:
        """A `gitops-bot worker` (not waited for), with `env` added to the cluster's."""
        return self._spawn(name, "worker", env)

    def start_scheduler(self, name: str = "scheduler") -> Proc:
        """The `gitops-bot scheduler` (not waited for)."""
        return self._spawn(name, "scheduler")

    def wait_web(self, url: str, timeout: float = 60) -> None:
        """Until GET /readyz answers 200."""

        def ready() -> bool:
            try:
                return requests.get(f"{url}/readyz", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_until(ready, timeout, f"{url}/readyz")

    def wait_worker(self, name: str, timeout: float = 60) -> None:
        """Until the worker has registered with RQ."""
        from rq import Worker

        pid = self.procs[name].pid

        def registered() -> bool:
            self._check_alive(name)
            return any(w.pid == pid for w in Worker.all(connection=self.redis))

        wait_until(registered, timeout, f"worker {name} to register")

    def wait_scheduler(self, timeout: float = 60) -> None:
        """Until the periodic jobs are registered with rq-scheduler."""

        def registered() -> bool:
            self._check_alive("scheduler")
            return self.redis.zscore("rq:scheduler:scheduled_jobs", "gitops-sweep") is not None

        wait_until(registered, timeout, "the scheduler's periodic jobs")

    def _check_alive(self, name: str) -> None:
        proc = self.procs[name]
        if not proc.alive():
            raise AssertionError(f"{name} exited with {proc.popen.returncode}:\n{self.tail(name)}")

    # -- faults ------------------------------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> float:
        """Sends `sig` to the process (not its group: a forked child lives on, as it would).
        Returns the moment (time.monotonic) it was sent."""
        proc = self.procs[name]
        os.kill(proc.pid, sig)
        killed_at = time.monotonic()
        proc.popen.wait(timeout=10)
        return killed_at

    def replace(self, name: str) -> Proc:
        """Starts a new process of the same kind under the same name (a supervisor's restart)."""
        old = self.procs[name]
        self.retired.append(old)
        return self._spawn(name, old.kind)

    def pid_of_port(self, port: int) -> str | None:
        """The name of the cluster process holding a TCP connection from local `port`."""
        inodes = _socket_inodes_of_port(port)
        if not inodes:
            return None
        for name, proc in self.procs.items():
            if proc.alive() and inodes & _socket_inodes_of_pid(proc.pid):
                return name
        return None

    # -- stopping ----------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGKILLs every process group: nothing of a scenario needs a graceful stop, and a
        forked child (RQ's scheduler) goes with its worker."""
        for proc in [*self.procs.values(), *self.retired]:
            _signal_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)

    def tail(self, name: str, lines: int = 40) -> str:
        """The last lines of a process's log."""
        log = self.logs / f"{name}.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _socket_inodes_of_pid(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        entries = list(fd_dir.iterdir())
    except OSError:
        return inodes
    for entry in entries:
        try:
            target = os.readlink(entry)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _socket_inodes_of_port(port: int) -> set[str]:
    """Inodes of the TCP sockets whose local port is `port` (from /proc/net/tcp{,6})."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port:
                found.add(fields[9])
    return found
