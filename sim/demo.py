"""`gitops-bot demo`: the whole product in a minute, on one machine, with nothing installed.

It starts the embedded bot (`gitops-bot serve`: SQLite in a temporary directory and the
in-process queue) as a child process, and around it, in this process, the GitLab double as a
real HTTP server, a fake approval system that approves each request after a moment, and a fake
CI/deployment pipeline that passes the MR checks and calls back after each merge. It submits a
sample change in each step order through the REST API and prints a line whenever a request
moves (time, operation, order, state, step), until both are VALIDATED or the time is up.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

from bot.core.labels import label_for
from bot.core.states import BindingState, Flow
from bot.store.engine import make_engine
from bot.store.flags import set_flag
from sim.approval import FakeApprovalSystem
from sim.deploy import FakeDeployPipeline
from sim.gitlab import GitLabDouble
from sim.relay import WebhookRelay

PROJECT = "demo/platform-config"
#: The project hook for the bot (the relay sends it to the bot's URL).
BOT_HOOK = "http://gitops-bot.demo/webhooks/gitlab"
#: Seconds between looks at the requests (the terminal's refresh, not a wait inside the bot).
REFRESH = 0.25
#: Short timings so that the demo moves at a watchable pace.
TIMINGS = {
    "GITOPS_SWEEP_INTERVAL": "2",
    "GITOPS_STEP_TIMEOUT": "15",
    "GITOPS_RECONCILE_INTERVAL": "2",
    "GITOPS_RECONCILE_MIN_AGE": "5",
}
#: The sample changes: (subject, file, content, title), one per step order.
SAMPLES = {
    Flow.APPROVE_FIRST: ("checkout", "services/checkout.yaml", "replicas: 4\n", "Scale checkout"),
    Flow.MR_FIRST: ("search", "services/search.yaml", "timeout_ms: 800\n", "Tune search"),
}
DONE = "VALIDATED"
#: States in which a request will not move on without a person.
STUCK = frozenset({"CREATE_FAILED", "HANDLE_FAILED", "REJECTED", "CLOSED"})


@dataclass
class Request:
    """A sample request and what was last shown of it."""

    flow: Flow
    operation_id: str
    #: history entries already printed
    printed: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def phase(self) -> str:
        """The request's state as the status API last said."""
        return str(self.data.get("phase", ""))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Demo:
    """One demo run: the world, the bot, the two requests, and what is printed."""

    def __init__(self, out: Callable[[str], None], *, port: int, timeout: float) -> None:
        self.out = out
        self.port = port
        self.timeout = timeout
        self.url = f"http://127.0.0.1:{port}"
        self.token = secrets.token_urlsafe(16)
        self.started = time.monotonic()
        self.tick = threading.Event()  # never set: its wait() is the refresh clock
        #: seconds from the start until both requests were VALIDATED
        self.took = 0.0

    def run(self) -> int:
        """Everything, start to finish; the exit status (0: both VALIDATED)."""
        with tempfile.TemporaryDirectory(prefix="gitops-demo-") as tmp, ExitStack() as stack:
            gitlab, gitlab_url = self._gitlab(stack)
            approvals = FakeApprovalSystem(
                secrets.token_hex(16),
                decide_after=1.5,
                targets=[f"{self.url}/webhooks/approval"],
            )
            approvals.start()
            stack.callback(approvals.stop)
            deploy = FakeDeployPipeline(
                gitlab,
                deploy_secret=secrets.token_hex(16),
                targets=[f"{self.url}/webhooks/deploy"],
                ci_seconds=1.0,
                deploy_seconds=1.0,
            )
            deploy.start()
            stack.callback(deploy.stop)
            hook_secret = secrets.token_hex(16)
            gitlab.add_hook(PROJECT, BOT_HOOK, token=hook_secret)
            gitlab.add_hook(PROJECT, deploy.hook_url, token=deploy.hook_token)
            relay = WebhookRelay(gitlab, {BOT_HOOK: [f"{self.url}/webhooks/gitlab"]})
            relay.start()
            stack.callback(relay.stop)

            database = f"sqlite:///{Path(tmp) / 'gitops-demo.sqlite3'}"
            env = {
                "GITOPS_DATABASE_URL": database,
                "GITOPS_GITLAB_URL": gitlab_url,
                "GITOPS_GITLAB_TOKEN": "demo-author-token",
                "GITOPS_APPROVER_TOKENS": "demo-approver-1-token,demo-approver-2-token",
                "GITOPS_WEBHOOK_SECRET": hook_secret,
                "GITOPS_APPROVAL_URL": approvals.url,
                "GITOPS_APPROVAL_SECRET": approvals.secret,
                "GITOPS_DEPLOY_SECRET": deploy.deploy_secret,
                "GITOPS_API_TOKEN": self.token,
                "GITOPS_PUBLIC_URL": self.url,
                **TIMINGS,
            }
            log = Path(tmp) / "gitops-bot.log"
            stack.enter_context(self._bot(env, log))
            self.out(
                f"the bot (gitops-bot serve, embedded: SQLite + in-process queue) at {self.url}"
            )
            self.out(f"  dashboard   {self.url}/   (Authorization: Bearer {self.token})")
            self.out(f"  status API  {self.url}/api/v1/changes/<operation_id>   (same token)")
            self.out(f"  GitLab double {gitlab_url}, project {PROJECT}")
            self.out(f"  bot log     {log} (removed at the end)")
            if not self._ready(log):
                return 1
            engine = make_engine(database)
            try:
                requests_ = [
                    self._submit(engine, flow) for flow in (Flow.APPROVE_FIRST, Flow.MR_FIRST)
                ]
            finally:
                engine.dispose()
            finished = self._follow(requests_)
            if finished:
                self._show_mrs(requests_, gitlab)
            self._summary(requests_, gitlab, finished)
            if not finished:
                self.out(f"-- the last lines of the bot's log ({log}):")
                for line in log.read_text(errors="replace").splitlines()[-20:]:
                    self.out(f"   {line}")
            return 0 if finished else 1

    # -- the world ---------------------------------------------------------------------------

    def _gitlab(self, stack: ExitStack) -> tuple[GitLabDouble, str]:
        gitlab = GitLabDouble("http://gitlab.demo")
        gitlab.add_project(
            PROJECT,
            files={path: "# managed by gitops-bot\n" for _, path, _, _ in SAMPLES.values()},
        )
        gitlab.add_user("gitops-bot", token="demo-author-token", access={PROJECT: 40})
        for n in (1, 2):
            gitlab.add_user(f"approver-{n}", token=f"demo-approver-{n}-token", access={PROJECT: 40})
        url = stack.enter_context(gitlab.serve())
        return gitlab, url

    @contextmanager
    def _bot(self, env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
        """`gitops-bot serve` as a child process, stopped (SIGTERM, then SIGKILL) at the end."""
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("GITOPS_", "PORT"))}
        command = [
            sys.executable,
            "-c",
            "from gitops_bot.cli import main; main()",
            "serve",
            "--port",
            str(self.port),
        ]
        with log.open("wb") as sink:
            child = subprocess.Popen(
                command,
                env={**inherited, **env},
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            yield child
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=5)

    def _ready(self, log: Path) -> bool:
        """Until GET /readyz answers 200 (within the time allowed)."""
        while self._left() > 0:
            try:
                if requests.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            self.tick.wait(REFRESH)
        self.out(f"the bot did not get ready in time; its log: {log}")
        return False

    # -- the requests ------------------------------------------------------------------------

    def _submit(self, engine: Any, flow: Flow) -> Request:
        """Sets the order flag (read per request) and submits the sample change of that order."""
        set_flag(engine, "workflow.order", flow.value)
        set_flag(engine, "poll.pipeline_tiers", [[2, 60]])
        subject, path, content, title = SAMPLES[flow]
        body = {
            "subject_id": subject,
            "target_key": path,
            "project": PROJECT,
            "target_branch": "main",
            "title": title,
            "requested_by": "newcomer",
            "files": [{"path": path, "content": content}],
        }
        answer = requests.post(
            f"{self.url}/api/v1/changes",
            json=body,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )
        answer.raise_for_status()
        data = answer.json()
        self.out(
            f"{self._clock()}  submitted {title!r} ({flow.value}): {data['operation_id']}"
            f"  {data['status_url']}"
        )
        return Request(flow, data["operation_id"])

    def _follow(self, requests_: list[Request]) -> bool:
        """Prints each move of each request until all are VALIDATED (True) or time is up."""
        while self._left() > 0:
            for req in requests_:
                self._look(req)
            if all(r.phase == DONE for r in requests_):
                self.took = time.monotonic() - self.started
                return True
            if any(r.phase in STUCK for r in requests_):
                return False
            self.tick.wait(REFRESH)
        self.out(f"{self._clock()}  timed out after {self.timeout:.0f}s")
        return False

    def _look(self, req: Request) -> None:
        """Reads the request (with its history) and prints the moves not shown yet."""
        try:
            answer = requests.get(
                f"{self.url}/api/v1/changes/{req.operation_id}",
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=5,
            )
        except requests.RequestException:
            return
        if answer.status_code != 200:
            return
        req.data = answer.json()
        history = req.data.get("history") or []
        for entry in history[req.printed :]:
            self.out(self._line(req, entry))
        req.printed = len(history)

    def _line(self, req: Request, entry: dict[str, Any]) -> str:
        """One progress line: time, operation, order, state (from -> to), step, event, source."""
        at = datetime.fromisoformat(str(entry["at"]).replace("Z", "+00:00")).astimezone()
        clock = f"{at:%H:%M:%S}.{at.microsecond // 1000:03d}"
        head = f"{clock}  {req.operation_id[:8]}  {req.flow.value:<13}"
        if not entry.get("step_code"):
            return f"{head}  (ignored a late or duplicate {entry['event']} from {entry['source']})"
        moved = f"{entry['from'] or 'new'} -> {entry['to']}"
        return (
            f"{head}  {moved:<34}  {entry['step']} ({entry['step_code']})"
            f"  on {entry['event']} from {entry['source']}"
        )

    def _show_mrs(self, requests_: list[Request], gitlab: GitLabDouble) -> None:
        """Waits (briefly) for each MR to show the result, then prints its label and comment."""
        wanted = label_for(BindingState.VALIDATED)
        mrs: dict[str, int] = {}
        for req in requests_:
            tail = str(req.data.get("mr_url") or "").rsplit("/", 1)[-1]
            if tail.isdigit():
                mrs[req.operation_id] = int(tail)
        limit = time.monotonic() + min(15.0, max(self._left(), 0.0))
        while time.monotonic() < limit and not all(
            wanted in gitlab.mr(PROJECT, iid).labels for iid in mrs.values()
        ):
            self.tick.wait(REFRESH)
        for req in requests_:
            iid = mrs.get(req.operation_id)
            if iid is None:
                continue
            mr = gitlab.mr(PROJECT, iid)
            heading = next(
                (
                    line
                    for note in mr.notes.values()
                    for line in note.body.splitlines()
                    if line.startswith("#### ")
                ),
                "(no status comment yet)",
            )
            labels = ", ".join(label for label in mr.labels if label.startswith("gitops::"))
            self.out(f"MR !{iid} ({req.flow.value}): label {labels or '-'}; comment {heading!r}")

    def _summary(self, requests_: list[Request], gitlab: GitLabDouble, finished: bool) -> None:
        self.out("")
        for req in requests_:
            self.out(f"{req.flow.value:<13}  {req.operation_id}  {req.phase or 'unknown'}")
        calls = len([c for c in gitlab.calls if "/hooks" not in c.path])
        verdict = f"both VALIDATED in {self.took:.1f}s" if finished else "not finished"
        self.out(f"{verdict}; {calls} GitLab API calls for the two changes")

    def _clock(self) -> str:
        now = datetime.now().astimezone()
        return f"{now:%H:%M:%S}.{now.microsecond // 1000:03d}"

    def _left(self) -> float:
        return self.timeout - (time.monotonic() - self.started)


def run(out: Callable[[str], None], *, port: int | None = None, timeout: float = 120.0) -> int:
    """Runs the demo; 0 when both sample changes reached VALIDATED within `timeout` seconds."""
    return Demo(out, port=port or free_port(), timeout=timeout).run()
