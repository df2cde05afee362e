"""The bot as an operator runs it, and the world around it, for the end-to-end scenarios.

Real OS processes from the Procfile (two gunicorn web, two `gitops-bot worker`, one `gitops-bot
scheduler`) on PostgreSQL and Redis; in this test process, real HTTP servers for the GitLab
double, the fake approval system and the fake CI/deployment pipeline, with a relay that sends
the double's webhooks to the two web instances in turn. Verbs here are what a user or an
operator does and sees: submit through the REST API, read the status API, look at the MR.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from redis import Redis
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from bot.core.labels import SCOPE, label_for, phase_title
from bot.core.states import BindingState, Flow, Step
from bot.gitlab.notes import status_marker
from bot.store.flags import set_flag
from bot.store.models import AUDIT, BINDINGS, INBOX, OPERATIONS
from sim.approval import FakeApprovalSystem
from sim.deploy import FakeDeployPipeline
from sim.gitlab import GitLabDouble, MergeRequest, Note
from sim.relay import WebhookRelay
from tests.e2e.cluster import BIN, Cluster, wait_until
from tests.e2e.names import (
    API_TOKEN,
    APPROVERS,
    AUTHOR,
    BOT_HOOK,
    FILE,
    FLAGS,
    ONE_EACH,
    PATHS,
    PROJECT,
    SECRETS,
    SETTLE,
    TIMINGS,
)
from tests.e2e.world_commands import CommandViews
from tests.ports import free_port

__all__ = [
    "API_TOKEN",
    "APPROVERS",
    "AUTHOR",
    "BOT_HOOK",
    "FILE",
    "ONE_EACH",
    "PATHS",
    "PROJECT",
    "SECRETS",
    "SETTLE",
    "TIMINGS",
    "World",
]

#: Times `submit` sends a request the API answered 503 gitlab_unavailable (at once: nothing was
#: recorded, and the faults it meets are counted, not timed).
SUBMIT_ATTEMPTS = 10


@dataclass
class World(CommandViews):
    """Everything one scenario runs against, and the verbs to drive and observe it."""

    engine: Engine
    redis: Redis
    logs: Path
    gitlab: GitLabDouble = field(init=False)
    approvals: FakeApprovalSystem = field(init=False)
    deploy: FakeDeployPipeline = field(init=False)
    relay: WebhookRelay = field(init=False)
    cluster: Cluster = field(init=False)
    web: list[str] = field(init=False)
    gitlab_url: str = field(init=False)
    _stack: ExitStack = field(default_factory=ExitStack)
    #: worker name -> the URL of its /metrics (started with worker_metrics=True)
    worker_metrics: dict[str, str] = field(default_factory=dict)
    _n: int = 0

    # -- setting up --------------------------------------------------------------------------

    def start(
        self, *, workers: int = 2, webs: int = 2, worker_metrics: bool = False, **env: str
    ) -> World:
        """Starts the doubles and the processes; returns when every process is ready. With
        `worker_metrics`, each worker answers /metrics on a port of its own (`metrics_of`)."""
        self.gitlab = GitLabDouble("http://gitlab.e2e.test", mode="new")
        self.gitlab.add_project(PROJECT, files={FILE: "replicas: 1\n"})
        self.gitlab.add_user(AUTHOR, token="author-token", access={PROJECT: 40})
        for name in APPROVERS:
            self.gitlab.add_user(name, token=f"{name}-token", access={PROJECT: 40})
        self.gitlab.add_user("alice", token="alice-token", access={PROJECT: 30})
        self.gitlab_url = self._stack.enter_context(self.gitlab.serve())
        ports = [free_port() for _ in range(webs)]
        self.web = [f"http://127.0.0.1:{port}" for port in ports]

        self.approvals = FakeApprovalSystem(
            SECRETS["approval"], targets=[f"{url}/webhooks/approval" for url in self.web]
        )
        self.approvals.start()
        self._stack.callback(self.approvals.stop)
        self.deploy = FakeDeployPipeline(
            self.gitlab,
            deploy_secret=SECRETS["deploy"],
            targets=[f"{url}/webhooks/deploy" for url in self.web],
        )
        self.deploy.start()
        self._stack.callback(self.deploy.stop)
        self.gitlab.add_hook(PROJECT, BOT_HOOK, token=SECRETS["webhook"])
        self.gitlab.add_hook(PROJECT, self.deploy.hook_url, token=self.deploy.hook_token)
        self.relay = WebhookRelay(
            self.gitlab, {BOT_HOOK: [f"{url}/webhooks/gitlab" for url in self.web]}
        )
        self.relay.start()
        self._stack.callback(self.relay.stop)

        for key, value in FLAGS.items():
            set_flag(self.engine, key, value)
        self.cluster = Cluster(self._env(env), self.logs, self.redis)
        self._stack.callback(self.cluster.stop)
        for n, port in enumerate(ports, start=1):
            self.cluster.start_web(f"web-{n}", port)
        for n in range(1, workers + 1):
            extra: dict[str, str] = {}
            if worker_metrics:
                port = free_port()
                self.worker_metrics[f"worker-{n}"] = f"http://127.0.0.1:{port}/metrics"
                extra["GITOPS_WORKER_METRICS_PORT"] = str(port)
            self.cluster.start_worker(f"worker-{n}", extra)
        self.cluster.start_scheduler()
        for url in self.web:
            self.cluster.wait_web(url)
        for n in range(1, workers + 1):
            self.cluster.wait_worker(f"worker-{n}")
        self.cluster.wait_scheduler()
        return self

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        url = self.engine.url.render_as_string(hide_password=False)
        redis_kwargs = self.redis.connection_pool.connection_kwargs
        redis_url = (
            f"redis://{redis_kwargs.get('host', '127.0.0.1')}:{redis_kwargs.get('port', 6379)}"
            f"/{redis_kwargs.get('db', 0)}"
        )
        return {
            "GITOPS_DATABASE_URL": url,
            "GITOPS_REDIS_URL": redis_url,
            "GITOPS_GITLAB_URL": self.gitlab_url,
            "GITOPS_GITLAB_TOKEN": "author-token",
            "GITOPS_APPROVER_TOKENS": ",".join(f"{name}-token" for name in APPROVERS),
            "GITOPS_WEBHOOK_SECRET": SECRETS["webhook"],
            "GITOPS_APPROVAL_URL": self.approvals.url,
            "GITOPS_APPROVAL_SECRET": SECRETS["approval"],
            "GITOPS_DEPLOY_SECRET": SECRETS["deploy"],
            "GITOPS_API_TOKEN": API_TOKEN,
            "GITOPS_PUBLIC_URL": self.web[0],
            "WEB_CONCURRENCY": "2",
            **TIMINGS,
            **extra,
        }

    def stop(self) -> None:
        """Stops the processes, then the doubles."""
        self._stack.close()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Runs `gitops-bot <args>` as an operator would, on the cluster's environment."""
        command = [str(BIN / "gitops-bot"), *args]
        return subprocess.run(
            command, env=self.cluster.env, capture_output=True, text=True, timeout=60, check=False
        )

    def add_project(self, path: str, files: Mapping[str, str]) -> None:
        """Another project in GitLab, set up as PROJECT is: the bot's accounts Maintainers,
        alice a Developer, the bot's and the deployment pipeline's hooks."""
        self.gitlab.add_project(path, files=dict(files))
        for name in (AUTHOR, *APPROVERS):
            self.gitlab.add_member(path, name, 40)
        self.gitlab.add_member(path, "alice", 30)
        self.gitlab.add_hook(path, BOT_HOOK, token=SECRETS["webhook"])
        self.gitlab.add_hook(path, self.deploy.hook_url, token=self.deploy.hook_token)

    def configure_project(self, **settings: Any) -> None:
        """Changes the double's project settings (merge_method, required_approvals, ...)."""
        with self.gitlab.lock:
            project = self.gitlab.project(PROJECT)
            for name, value in settings.items():
                setattr(project, name, value)

    # -- doing -------------------------------------------------------------------------------

    def submit(self, flow: Flow | None = None, **kw: Any) -> str:
        """POSTs a change to the REST API (as `submit_answer`), answered 202; its operation id."""
        answer = self.submit_answer(flow, **kw)
        assert answer.status_code == 202, answer.text
        op_id: str = answer.json()["operation_id"]
        return op_id

    def submit_answer(
        self,
        flow: Flow | None = None,
        *,
        subject: str | None = None,
        content: str | None = None,
        web: int = 0,
        key: str | None = None,
        project: str = PROJECT,
        path: str | None = None,
        branch: str = "main",
    ) -> requests.Response:
        """What the REST API answers a change writing `path` (default `config/<subject>.yaml`)
        in `project`, the order flag set first when `flow` is given."""
        if flow is not None:
            set_flag(self.engine, "workflow.order", flow.value)
        self._n += 1
        subject = subject or f"service-{self._n}"
        path = path or f"config/{subject}.yaml"
        body = {
            "subject_id": subject,
            "target_key": path,
            "project": project,
            "target_branch": branch,
            "title": f"Scale {subject}",
            "requested_by": "alice",
            "files": [{"path": path, "content": content or "replicas: 3\n"}],
        }
        answer = self.api("POST", "/changes", web=web, json=body, key=key)
        for _ in range(SUBMIT_ATTEMPTS):
            # the project's policy file is read at submission: while GitLab fails (the faults
            # tests make it) the API answers 503 gitlab_unavailable, nothing recorded, and a
            # client sends the request again
            if answer.status_code != 503 or answer.json().get("error") != "gitlab_unavailable":
                break
            answer = self.api("POST", "/changes", web=web, json=body, key=key)
        return answer

    def api(
        self, method: str, path: str, *, web: int = 0, key: str | None = None, **kw: Any
    ) -> requests.Response:
        """A call to /api/v1 on one web instance, with the API token."""
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return requests.request(
            method, f"{self.web[web]}/api/v1{path}", headers=headers, timeout=10, **kw
        )

    def post_approval(self, body: bytes, web: int = 0) -> int:
        """POSTs a signed approval callback body to one web instance; the status."""
        return requests.post(
            f"{self.web[web]}/webhooks/approval",
            data=body,
            headers=self.approvals.signed_headers(body),
            timeout=10,
        ).status_code

    # -- seeing ------------------------------------------------------------------------------

    def status(self, op_id: str, web: int = 0) -> dict[str, Any]:
        """GET /api/v1/changes/<id> as the requester sees it."""
        answer = self.api("GET", f"/changes/{op_id}", web=web)
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()
        return data

    def state(self, op_id: str) -> BindingState:
        """The binding state the operation is in (from PostgreSQL)."""
        query = (
            select(BINDINGS.c.state)
            .join(OPERATIONS, OPERATIONS.c.binding_id == BINDINGS.c.id)
            .where(OPERATIONS.c.id == op_id)
        )
        with self.engine.connect() as conn:
            return BindingState(conn.execute(query).scalar_one())

    def op(self, op_id: str) -> dict[str, Any]:
        """The operation's row."""
        with self.engine.connect() as conn:
            row = conn.execute(select(OPERATIONS).where(OPERATIONS.c.id == op_id)).one()
        return dict(row._mapping)

    def audit(self, op_id: str) -> list[dict[str, Any]]:
        """The operation's audit rows, oldest first."""
        query = select(AUDIT).where(AUDIT.c.operation_id == op_id).order_by(AUDIT.c.id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def transitions(self, op_id: str) -> list[tuple[str | None, str, str]]:
        """(from, to, event) of every transition (stale events left out)."""
        return [
            (r["from_state"], r["to_state"], r["event"])
            for r in self.audit(op_id)
            if r["version"] > 0
        ]

    def deployed_rows(self, op_id: str) -> int:
        """Audit rows of the `deployed` transition (the validated count of one operation)."""
        query = (
            select(func.count())
            .select_from(AUDIT)
            .where(AUDIT.c.operation_id == op_id, AUDIT.c.event == "deployed", AUDIT.c.version > 0)
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def inbox_rows(self, source: str | None = None) -> list[dict[str, Any]]:
        """Stored deliveries (of one source), oldest first."""
        query = select(INBOX.c.delivery_key, INBOX.c.status, INBOX.c.source).order_by(INBOX.c.id)
        if source is not None:
            query = query.where(INBOX.c.source == source)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def wait_inbox_done(self, timeout: float = 30.0) -> None:
        """Until every stored delivery has been processed (none left `received`)."""
        wait_until(
            lambda: all(r["status"] != "received" for r in self.inbox_rows()),
            timeout,
            "the inbox to be processed",
            interval=0.1,
        )

    def inbox_count(self, source: str | None = None) -> int:
        """Stored deliveries (of one source)."""
        query = select(func.count()).select_from(INBOX)
        if source is not None:
            query = query.where(INBOX.c.source == source)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def wait_state(
        self, op_id: str, state: BindingState, timeout: float = SETTLE, fail_on_failed: bool = True
    ) -> float:
        """Until the operation is in `state`; the seconds it took."""
        started = time.monotonic()

        def reached() -> bool:
            now = self.state(op_id)
            if fail_on_failed and now in (BindingState.CREATE_FAILED, BindingState.HANDLE_FAILED):
                raise AssertionError(f"{op_id} failed: {self.op(op_id)['error_detail']}")
            return now is state

        try:
            wait_until(reached, timeout, f"{op_id} to reach {state}", interval=0.1)
        except AssertionError as exc:
            op = self.op(op_id)
            where = (
                f"it is {self.state(op_id)} at step {op['step']} (deadline {op['deadline_at']}, "
                f"lease {op['lease_until']}, attempts {op['attempts']}, "
                f"error {op['error_detail']!r}); path {self.describe(op_id)}"
            )
            raise AssertionError(f"{exc}: {where}") from None
        return time.monotonic() - started

    def wait_all(
        self, op_ids: Iterable[str], state: BindingState, timeout: float = SETTLE
    ) -> float:
        """Until every operation is in `state`; the seconds it took."""
        started = time.monotonic()
        for op_id in op_ids:
            self.wait_state(op_id, state, max(1.0, timeout - (time.monotonic() - started)))
        return time.monotonic() - started

    def mr(self, op_id: str) -> MergeRequest:
        """The operation's MR in the double."""
        op = self.op(op_id)
        assert op["mr_iid"] is not None, f"{op_id} has no MR yet"
        return self.gitlab.mr(op["project"], op["mr_iid"])

    def status_notes(self, op_id: str) -> list[Note]:
        """The bot's comments on the operation's MR carrying its status marker."""
        author = self.gitlab.user(AUTHOR).id
        marker = status_marker(op_id)
        return [
            n for n in self.mr(op_id).notes.values() if n.author_id == author and marker in n.body
        ]

    def wait_ui(self, op_id: str, timeout: float = 30.0) -> None:
        """Until the MR shows the operation's current state: one comment, one gitops:: label."""

        def shown() -> bool:
            state = self.state(op_id)
            notes = self.status_notes(op_id)
            labels = [x for x in self.mr(op_id).labels if x.startswith(SCOPE)]
            step = Step(self.op(op_id)["step"])
            return (
                len(notes) == 1
                and f"GitOps · {phase_title(state)}" in notes[0].body
                and f"{step.name} ({step.value})" in notes[0].body
                and labels == [label_for(state)]
            )

        wait_until(shown, timeout, f"the MR of {op_id} to show its state", interval=0.2)

    def gitlab_calls(self, method: str | None = None, path: str | None = None) -> int:
        """GitLab API calls the double answered, of a method and path."""
        return self.gitlab.count(method, path)

    def effects(self, op_id: str) -> dict[str, Any]:
        """What happened in GitLab for the operation: MRs, merges, approvals, comments."""
        op = self.op(op_id)
        iid = op["mr_iid"]
        project = self.gitlab.project(op["project"])
        mrs = [m for m in project.mrs.values() if m.source_branch == op["branch"] or m.iid == iid]
        # the project's calls name it by id or by path (iids repeat across projects)
        prefixes = (f"/projects/{project.id}/", f"/projects/{project.path}/")
        approved = [
            call
            for call in self.gitlab.calls_matching(
                "POST", path_endswith=f"/merge_requests/{iid}/approve", status=201
            )
            if call.path.startswith(prefixes)
        ]
        per_account: dict[str, int] = {}
        for call in approved:
            per_account[call.user or "?"] = per_account.get(call.user or "?", 0) + 1
        return {
            "mrs": len(mrs),
            "merges": len(
                [
                    call
                    for call in self.gitlab.calls_matching(
                        "PUT", path_endswith=f"/merge_requests/{iid}/merge", status=200
                    )
                    if call.path.startswith(prefixes)
                ]
            ),
            "approvals": per_account,
            "comments": len(self.status_notes(op_id)),
            "approval_requests": len(
                [a for a in self.approvals.approvals.values() if a.operation_id == op_id]
            ),
        }

    def callback_body(self, op_id: str, decision: str, request_id: str | None = None) -> bytes:
        """An approval callback body for the operation, as the approval system would sign it."""
        return self.approvals.callback_body(op_id, decision, request_id or uuid.uuid4().hex)

    def describe(self, op_id: str) -> str:
        """The operation's path, for assertion messages."""
        return json.dumps(self.transitions(op_id))
