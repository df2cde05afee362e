"""A fake CI/CD for the GitLab double: check pipelines pass, merged changes deploy and call back.

It listens to the double's webhooks as a second project hook (as a real deployment pipeline is
triggered by GitLab): a merge request pipeline that starts running finishes `ci_seconds` later
with `ci_outcome`; a merged MR is deployed `deploy_seconds` later, and the deployment calls
`POST /webhooks/deploy` on the bot (`X-Deploy-Token`), naming the project, the MR iid and the
merge commit, as a pipeline that knows nothing of the bot's operation ids would. Tests steer it:
lose the next callbacks, deploy by hand.
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests

from sim.gitlab import GitLabDouble
from sim.http import Server, Timers, json_response, read_body

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

#: Pipeline statuses that the fake CI finishes.
_RUNNING = frozenset({"created", "pending", "running"})


@dataclass(frozen=True)
class DeployReport:
    """One deploy callback: what it said, where it went, the bot's answer (0: none, -1: lost)."""

    project_id: int
    mr_iid: int
    sha: str | None
    url: str
    status: int


class FakeDeployPipeline:
    """The project's CI and deployment pipeline, fed by the double's webhooks over HTTP."""

    def __init__(
        self,
        double: GitLabDouble,
        *,
        deploy_secret: str,
        targets: Sequence[str] = (),
        hook_token: str = "deploy-pipeline-hook",
        ci_seconds: float | None = 0.2,
        ci_outcome: str = "success",
        deploy_seconds: float | None = 0.3,
    ) -> None:
        self.double = double
        self.deploy_secret = deploy_secret
        #: the bot's /webhooks/deploy URLs, used in turn
        self.targets = list(targets)
        self.hook_token = hook_token
        #: seconds until a running MR pipeline finishes (None: CI left to the test)
        self.ci_seconds = ci_seconds
        self.ci_outcome = ci_outcome
        #: seconds from a merge to its deploy callback (None: deploys only by hand)
        self.deploy_seconds = deploy_seconds
        self.reports: list[DeployReport] = []
        self._lose = 0
        self._pipelines_seen: set[int] = set()
        self._merges_seen: set[tuple[int, int]] = set()
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._timers = Timers("fake-deploy")
        self._server = Server(self._app)
        self.url = self._server.url
        #: where the double's project hook for this pipeline points
        self.hook_url = f"{self.url}/hooks/gitlab"

    def start(self) -> str:
        """Starts serving; the base URL."""
        return self._server.start()

    def stop(self) -> None:
        """Stops acting and serving."""
        self._timers.stop()
        self._server.stop()

    def lose_next(self, n: int = 1) -> None:
        """The next `n` deploy callbacks are never sent (the deployment itself happens)."""
        with self._lock:
            self._lose += n

    def deploy(self, project_id: int, mr_iid: int, *, status: str = "success") -> int:
        """Deploys a merged MR and calls back now; the bot's answer (0: none, -1: lost)."""
        mr = self.double.mr(project_id, mr_iid)
        sha = mr.merge_commit_sha
        body = {"project_id": project_id, "mr_iid": mr_iid, "status": status, "sha": sha}
        with self._lock:
            lost = self._lose > 0
            self._lose -= 1 if lost else 0
            url = self.targets[next(self._turn) % len(self.targets)] if self.targets else ""
        answer = -1
        if not lost and url:
            try:
                answer = requests.post(
                    url,
                    data=json.dumps(body).encode(),
                    headers={
                        "Content-Type": "application/json",
                        "X-Deploy-Token": self.deploy_secret,
                    },
                    timeout=10,
                ).status_code
            except requests.RequestException:
                answer = 0
        with self._lock:
            self.reports.append(DeployReport(project_id, mr_iid, sha, url, answer))
        return answer

    def deployed(self, project_id: int, mr_iid: int) -> list[DeployReport]:
        """The deploy callbacks made (or lost) for one MR."""
        with self._lock:
            return [r for r in self.reports if (r.project_id, r.mr_iid) == (project_id, mr_iid)]

    # -- the double's webhooks ---------------------------------------------------------------

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        given = environ.get("HTTP_X_GITLAB_TOKEN", "")
        if not hmac.compare_digest(given.encode(), self.hook_token.encode()):
            return json_response(start_response, 404, b'{"message": "not found"}')
        try:
            payload = json.loads(read_body(environ) or b"{}")
            self._on_event(environ.get("HTTP_X_GITLAB_EVENT", ""), payload)
        except (ValueError, KeyError, TypeError):
            log.exception("fake deploy pipeline: unusable webhook")
        return json_response(start_response, 200, b"{}")

    def _on_event(self, event: str, payload: dict[str, Any]) -> None:
        attrs = payload.get("object_attributes") or {}
        project_id = int(payload["project"]["id"])
        if event == "Pipeline Hook" and self.ci_seconds is not None:
            pipeline_id = int(attrs["id"])
            if attrs.get("status") not in _RUNNING or attrs.get("source") != "merge_request_event":
                return
            with self._lock:
                if pipeline_id in self._pipelines_seen:
                    return
                self._pipelines_seen.add(pipeline_id)
            self._timers.call_in(self.ci_seconds, lambda: self._finish(project_id, pipeline_id))
        elif event == "Merge Request Hook" and attrs.get("action") == "merge":
            iid = int(attrs["iid"])
            with self._lock:
                if (project_id, iid) in self._merges_seen or self.deploy_seconds is None:
                    return
                self._merges_seen.add((project_id, iid))
            self._timers.call_in(self.deploy_seconds, lambda: self.deploy(project_id, iid))

    def _finish(self, project_id: int, pipeline_id: int) -> None:
        pipeline = self.double.project(project_id).pipelines.get(pipeline_id)
        if pipeline is not None and pipeline.status in _RUNNING:
            self.double.set_pipeline(project_id, pipeline_id, self.ci_outcome)
