"""Secrets stay secret: compared in constant time, and never in a log line, an error body, a
status comment or a page."""

from __future__ import annotations

import ast
import hmac
import json
import logging
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.workflow.harness import PROJECT, SECRETS, Bot

ROOT = Path(__file__).resolve().parents[2]


def test_secret_checks_call_compare_digest(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook token, API token, deploy token and approval signature go through
    hmac.compare_digest (the code path, not a stopwatch)."""
    seen: list[int] = []
    real = hmac.compare_digest

    def recording(a: bytes | str, b: bytes | str) -> bool:
        seen.append(1)
        return real(a, b)  # type: ignore[type-var]

    monkeypatch.setattr(hmac, "compare_digest", recording)
    probes = [
        ("/webhooks/gitlab", {"X-Gitlab-Token": "wrong", "X-Gitlab-Event": "Pipeline Hook"}),
        ("/webhooks/deploy", {"X-Deploy-Token": "wrong"}),
        ("/webhooks/approval", {"X-Approval-Timestamp": "1", "X-Approval-Signature": "sha256=00"}),
        ("/api/v1/changes", {"Authorization": "Bearer wrong"}),
    ]
    for path, headers in probes:
        before = len(seen)
        response = client.post(path, data=b"{}", headers=headers)
        assert response.status_code == 401, path
        if path != "/webhooks/approval":  # a stale timestamp is refused before comparing
            assert len(seen) > before, f"{path} did not use compare_digest"


SECRET_NAMES = ("secret", "token", "signature")


def test_no_secret_is_compared_with_equals() -> None:
    """No `==`/`!=` in the web and approval code has a secret, token or signature on a side."""
    offenders = []
    for path in [*ROOT.glob("webhooks/*.py"), *ROOT.glob("bot/approval/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                isinstance(op, ast.Eq | ast.NotEq) for op in node.ops
            ):
                names = [ast.unparse(side).lower() for side in (node.left, *node.comparators)]
                if any(word in name for name in names for word in SECRET_NAMES):
                    offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_secrets_never_reach_logs_bodies_comments_or_pages(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole request, plus refused and failing calls, leaves no secret anywhere a person sees."""
    caplog.set_level(logging.DEBUG)
    secrets = [
        *SECRETS.values(),
        "author-token",
        "approver-1-token",
        "approver-2-token",
        bot.settings.api_token,
    ]
    seen: list[str] = []
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    bot.gitlab.fail_next(2, status=500)  # failures get logged: with no token in them
    bot.settle(advance=60)
    bot.pass_pipeline(op_id)
    bot.settle(advance=60)
    bot.deployed(op_id)
    bot.settle()
    from jobs.outbox import dispatch

    dispatch()
    assert bot.state(op_id) is S.VALIDATED
    for path, headers in [
        ("/webhooks/gitlab", {"X-Gitlab-Token": SECRETS["webhook"][:-1] + "x"}),
        ("/webhooks/approval", {"X-Approval-Signature": "sha256=" + "0" * 64}),
        ("/webhooks/deploy", {"X-Deploy-Token": SECRETS["deploy"] + "x"}),
        ("/api/v1/changes", {"Authorization": f"Bearer {bot.settings.api_token}x"}),
    ]:
        seen.append(bot.client.post(path, data=b"{}", headers=headers).get_data(as_text=True))
    auth = {"Authorization": f"Bearer {bot.settings.api_token}"}
    for path in (
        f"/api/v1/changes/{op_id}",
        "/api/v1/changes",
        "/metrics",
        "/readyz",
        "/",
        f"/changes/{op_id}",
    ):
        seen.append(bot.client.get(path, headers=auth).get_data(as_text=True))
    mr = bot.gitlab.project(PROJECT).mrs
    seen.extend(note.body for merge_request in mr.values() for note in merge_request.notes.values())
    seen.extend(json.dumps(call.body, default=str) for call in bot.gitlab.calls)
    seen.extend(
        record.getMessage() + json.dumps(vars(record), default=str) for record in caplog.records
    )
    assert len(seen) > 20
    leaks = [(secret, text[:200]) for text in seen for secret in secrets if secret in text]
    assert leaks == []
