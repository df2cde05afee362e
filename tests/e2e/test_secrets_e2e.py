"""No secret in anything a person sees, on the real processes: every process's log, every page,
the API, the metrics, the CLI and what the bot wrote on GitLab, after a change went through
with GitLab failing under it and refused deliveries at every door."""

from __future__ import annotations

import json

import pytest
import requests

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.figures import record
from tests.e2e.world import API_TOKEN, APPROVERS, PROJECT, SECRETS, World

pytestmark = pytest.mark.e2e

#: Every credential the world's processes were started with.
CREDENTIALS = [
    *SECRETS.values(),
    API_TOKEN,
    "author-token",
    "alice-token",
    *(f"{name}-token" for name in APPROVERS),
]


def refused_deliveries(world: World) -> list[str]:
    """Deliveries and calls with credentials one character longer: the answers' bodies."""
    web = world.web[0]
    near = {name: value + "x" for name, value in SECRETS.items()}
    tries = [
        ("/webhooks/gitlab", {"X-Gitlab-Token": near["webhook"], "X-Gitlab-Event": "Note Hook"}),
        ("/webhooks/approval", {"X-Approval-Signature": "sha256=" + "0" * 64}),
        ("/webhooks/deploy", {"X-Deploy-Token": near["deploy"]}),
        ("/api/v1/changes", {"Authorization": f"Bearer {API_TOKEN}x"}),
    ]
    answers = []
    for path, headers in tries:
        response = requests.post(f"{web}{path}", data=b"{}", headers=headers, timeout=10)
        assert response.status_code == 401, (path, response.status_code)
        answers.append(response.text)
    return answers


def test_no_secret_reaches_logs_pages_api_cli_or_gitlab(world: World) -> None:
    """A change through GitLab 500s and a 401, refused deliveries, then every log line, page,
    API answer, metric, CLI output and note searched for every credential: none found."""
    # in the worker's steps (the submission's own branch read is answered as it comes)
    world.gitlab.fail_next(2, 500, methods="POST", path_endswith="/repository/commits")
    world.gitlab.fail_next(1, 401, methods="POST", path_endswith="/approve")
    op_id = world.submit(Flow.APPROVE_FIRST, subject="svc-secrets")
    world.wait_state(op_id, S.VALIDATED)
    world.wait_ui(op_id)
    seen: dict[str, str] = {}
    for n, answer in enumerate(refused_deliveries(world)):
        seen[f"refusal {n}"] = answer
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    for web in world.web:
        for path in ("/", f"/changes/{op_id}", "/metrics", "/readyz", "/healthz"):
            seen[f"{web}{path}"] = requests.get(f"{web}{path}", timeout=10).text
        for path in (f"/api/v1/changes/{op_id}", "/api/v1/changes", "/api/v1/openapi.json"):
            seen[f"{web}{path}"] = requests.get(f"{web}{path}", headers=auth, timeout=10).text
    for args in (("show", op_id), ("list",), ("flags",)):
        done = world.cli(*args)
        seen[f"gitops-bot {' '.join(args)}"] = done.stdout + done.stderr
    project = world.gitlab.project(PROJECT)
    for mr in project.mrs.values():
        seen[f"MR !{mr.iid}"] = mr.title + mr.description + " ".join(mr.labels)
        for note in mr.notes.values():
            seen[f"MR !{mr.iid} note {note.id}"] = note.body
    for n, call in enumerate(world.gitlab.calls):
        seen[f"GitLab call {n}"] = json.dumps(call.body, default=str)
    for log in sorted(world.logs.glob("*.log")):
        seen[f"log {log.name}"] = log.read_text(errors="replace")
    logs = [name for name in seen if name.startswith("log ")]
    assert len(logs) >= 5, logs  # two webs, two workers, the scheduler
    assert any("500" in seen[name] or "ERROR" in seen[name] for name in logs)
    leaks = [
        f"{where}: {text[max(0, text.find(secret) - 80) : text.find(secret) + 40]!r}"
        for where, text in seen.items()
        for secret in CREDENTIALS
        if secret in text
    ]
    record("secrets: texts searched (logs, pages, API, CLI, GitLab)", len(seen), "texts")
    record("secrets: credentials found in them", len(leaks), "leaks")
    assert leaks == []
