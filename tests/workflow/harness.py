"""The whole bot in one process for workflow tests: the real app, jobs, queue (fakeredis or a
real Redis), the suite's database, the GitLab double and a fake approval system."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import responses
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine

from bot.approval import ApprovalClient, sign
from bot.config import Settings
from bot.core.states import BindingState, Flow
from bot.gitlab import Account, ApproveComponent, make_client
from bot.services import Clients, Services
from bot.store.submit import NewRequest, submit
from jobs import context
from jobs.inprocess import InProcess
from jobs.queue import RQWorkQueue
from sim.gitlab import GitLabDouble
from tests.builders import binding_state, operation
from webhooks import create_app

GITLAB = "https://gitlab.example.com"
APPROVAL = "https://approvals.example.com"
PUBLIC = "http://bot.test"
PROJECT = "platform/config"
SECRETS = {"webhook": "hook-secret", "approval": "approval-secret", "deploy": "deploy-secret"}


@dataclass
class FakeApprovalSystem:
    """The approval system's side: takes submissions, answers status, sends signed callbacks."""

    submitted: list[dict[str, Any]] = field(default_factory=list)
    decisions: dict[str, str] = field(default_factory=dict)
    withdrawn: list[str] = field(default_factory=list)
    #: called with the operation id while a submit call is still being answered
    on_submit: Callable[[str], None] | None = None

    def mount(self, rsps: responses.RequestsMock) -> None:
        """Answers the bot's calls through `responses`."""
        rsps.add_callback(responses.POST, f"{APPROVAL}/approvals", callback=self._submit)
        rsps.add_callback(
            responses.GET,
            re.compile(rf"{re.escape(APPROVAL)}/approvals/[^/]+$"),
            callback=self._status,
        )
        rsps.add_callback(
            responses.POST,
            re.compile(rf"{re.escape(APPROVAL)}/approvals/.+/withdraw"),
            callback=self._withdraw,
        )

    def _submit(self, request: Any) -> tuple[int, dict[str, str], str]:
        body = json.loads(request.body)
        approval_id = f"apr-{body['operation_id'][:8]}"
        if not any(s["operation_id"] == body["operation_id"] for s in self.submitted):
            self.submitted.append(body)
        self.decisions.setdefault(approval_id, "pending")
        if self.on_submit is not None:
            self.on_submit(body["operation_id"])
        return 201, {}, json.dumps({"approval_id": approval_id})

    def _status(self, request: Any) -> tuple[int, dict[str, str], str]:
        approval_id = request.url.rsplit("/", 1)[1]
        decision = self.decisions.get(approval_id, "pending")
        return 200, {}, json.dumps({"approval_id": approval_id, "decision": decision})

    def _withdraw(self, request: Any) -> tuple[int, dict[str, str], str]:
        self.withdrawn.append(request.url.rsplit("/", 2)[1])
        return 200, {}, "{}"

    def callback(
        self, operation_id: str, decision: str = "approved", request_id: str | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """A signed callback for the operation's submission (ext as it was submitted)."""
        sub = next(s for s in self.submitted if s["operation_id"] == operation_id)
        approval_id = f"apr-{operation_id[:8]}"
        self.decisions[approval_id] = decision
        body = json.dumps(
            {
                "request_id": request_id or f"cb-{operation_id[:8]}-{decision}",
                "operation_id": operation_id,
                "approval_id": approval_id,
                "decision": decision,
                "ext": sub["ext"],
            }
        ).encode()
        stamp = str(int(time.time()))
        return body, {
            "X-Approval-Timestamp": stamp,
            "X-Approval-Signature": sign(SECRETS["approval"], stamp, body),
            "Content-Type": "application/json",
        }


class Bot:
    """The bot, the doubles around it, and the verbs tests use to drive it."""

    def __init__(
        self,
        engine: Engine,
        redis: Any,
        rsps: responses.RequestsMock,
        *,
        gitlab_version: str | None = None,
        **settings: Any,
    ) -> None:
        # `gitlab_version`: a GitLab release's profile (sim/gitlab/versions.py), else the
        # double's own default
        self.gitlab = (
            GitLabDouble(GITLAB, version=gitlab_version)
            if gitlab_version is not None
            else GitLabDouble(GITLAB, mode="new")
        )
        self.gitlab.add_project(PROJECT, files={"config/prod.yaml": "replicas: 1\n"})
        self.gitlab.add_user("gitops-bot", token="author-token", access={PROJECT: 40})
        for n in (1, 2):
            self.gitlab.add_user(f"approver-{n}", token=f"approver-{n}-token", access={PROJECT: 40})
        self.gitlab.mount(rsps, base_url=GITLAB)
        self.approvals = FakeApprovalSystem()
        self.approvals.mount(rsps)
        self.settings = Settings(
            gitlab_url=GITLAB,
            approval_url=APPROVAL,
            public_url=PUBLIC,
            webhook_secret=SECRETS["webhook"],
            approval_secret=SECRETS["approval"],
            deploy_secret=SECRETS["deploy"],
            api_token="api-token",
            # the projects' .gitops/bot.yml is read (the product's default too)
            **{"policy_files": True, **settings},
        )
        self.services = Services(
            settings=self.settings,
            engine=engine,
            queue=RQWorkQueue(redis),
            redis=redis,
            clients=Clients(
                author=Account(make_client(GITLAB, "author-token"), "author"),
                approvers=[
                    Account(make_client(GITLAB, f"approver-{n}-token"), f"approver-{n}")
                    for n in (1, 2)
                ],
                approve=ApproveComponent(),
                approval=ApprovalClient(APPROVAL),
            ),
        )
        context.install(self.services)  # for the jobs tests call directly
        self.worker = InProcess(self.services)
        self.app = create_app(services=self.services)
        self.client: FlaskClient = self.app.test_client()

    # -- driving ---------------------------------------------------------------------------------
    def settle(self, advance: float = 0.0) -> None:
        """Runs every job due within `advance` seconds from now (delayed jobs included)."""
        self.worker.burst(until=time.time() + advance)
        assert not self.worker.errors, self.worker.errors

    def request(self, flow: Flow = Flow.APPROVE_FIRST, **kw: Any) -> str:
        """Submits a change as the API does and queues its first step; the operation id."""
        values: dict[str, Any] = {
            "subject_id": "service-a",
            "target_key": "config/prod.yaml",
            "project": PROJECT,
            "target_branch": "main",
            "title": "Scale service-a",
            "flow": flow,
            "requested_by": "alice",
            "files": [{"path": "config/prod.yaml", "content": "replicas: 3\n"}],
        }
        values.update(kw)
        op_id = submit(self.services.engine, NewRequest(**values)).operation_id
        self.services.queue.enqueue("jobs.drive.drive", op_id, job_id=f"drive:{op_id}")
        return op_id

    def apply_mr(self, iid: int) -> str:
        """Registers a person's MR as `/gitops apply` does (MR-first, files from the MR) and
        runs what is due; the operation id."""
        op_id = self.request(
            Flow.MR_FIRST,
            subject_id=f"{PROJECT}!{iid}",
            target_key=f"{PROJECT}:main",
            files=[],
            mr_iid=iid,
        )
        self.settle()
        return op_id

    def approve(self, op_id: str, decision: str = "approved") -> int:
        """The approval system calls back; the HTTP status the bot answered."""
        body, headers = self.approvals.callback(op_id, decision)
        return self.client.post("/webhooks/approval", data=body, headers=headers).status_code

    def pass_pipeline(self, op_id: str, status: str = "success", deliver: bool = True) -> None:
        """The MR's head pipeline finishes; GitLab's webhook is delivered unless told not to."""
        op = operation(self.services.engine, op_id)
        pipeline = self.gitlab.latest_pipeline(PROJECT, op["mr_iid"])
        assert pipeline is not None
        self.gitlab.set_pipeline(PROJECT, pipeline.id, status)
        if deliver:
            headers, body = self.gitlab.webhook(
                "pipeline",
                project=PROJECT,
                iid=op["mr_iid"],
                pipeline_id=pipeline.id,
                token=SECRETS["webhook"],
            )
            assert (
                self.client.post("/webhooks/gitlab", data=body, headers=headers).status_code < 300
            )

    def deployed(self, op_id: str, status: str = "success") -> int:
        """The deployment pipeline reports on the merged change."""
        op = operation(self.services.engine, op_id)
        body = json.dumps(
            {"project_id": op["project_id"], "mr_iid": op["mr_iid"], "status": status}
        ).encode()
        return self.client.post(
            "/webhooks/deploy", data=body, headers={"X-Deploy-Token": SECRETS["deploy"]}
        ).status_code

    def state(self, op_id: str) -> BindingState:
        """The binding state of the operation."""
        return binding_state(self.services.engine, op_id)

    def close(self) -> None:
        """Forgets the process-wide job services."""
        context.uninstall()
