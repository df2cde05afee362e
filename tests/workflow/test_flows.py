"""Both step orders from submission to VALIDATED, through real jobs, webhooks and the doubles."""

from __future__ import annotations

import pytest

from bot.core.identity import identity_from_request
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot


def test_approve_first_reaches_validated(bot: Bot) -> None:
    """Approval, then the bot's branch/commit/MR, checks, approvals, merge, deploy: VALIDATED."""
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    approved = identity_from_request(
        PROJECT, "main", [{"path": "config/prod.yaml", "content": "replicas: 3\n"}]
    )
    assert [s["ext"] for s in bot.approvals.submitted] == [
        {
            "project": PROJECT,
            "change": {
                "project": PROJECT,
                "target_branch": "main",
                "digest": approved.digest,
                "files": [{"path": "config/prod.yaml", "action": "write"}],
            },
        }
    ]
    assert "- write config/prod.yaml" in bot.approvals.submitted[0]["description"]
    assert bot.approve(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    op = operation(bot.services.engine, op_id)
    assert op["step"] == Step.CREATE_SUCCEEDED
    mr = bot.gitlab.mr(PROJECT, op["mr_iid"])
    assert "gitops::checking" in mr.labels
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).state == "merged"
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 3\n"
    assert bot.deployed(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED


def test_mr_first_reaches_validated(bot: Bot) -> None:
    """The MR and its checks first, then approval carrying ext.mrId, then approve and merge."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    op = operation(bot.services.engine, op_id)
    ext = bot.approvals.submitted[0]["ext"]
    assert {k: ext[k] for k in ("mrId", "project")} == {"mrId": op["mr_iid"], "project": PROJECT}
    head = bot.gitlab.mr(PROJECT, op["mr_iid"]).sha
    assert ext["change"]["head_sha"] == head
    assert ext["change"]["files"] == [{"path": "config/prod.yaml", "action": "write"}]
    assert f"Head commit: {head}" in bot.approvals.submitted[0]["description"]
    bot.approve(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    bot.deployed(op_id)
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED


def test_webhook_in_time_means_no_poll_calls(bot: Bot) -> None:
    """When the pipeline webhook arrives before the first poll is due, nothing polls GitLab."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    reads_before = bot.gitlab.count(method="GET", path_contains="/merge_requests/")
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    assert bot.gitlab.count(method="GET", path_contains="/merge_requests/") == reads_before
    bot.settle(advance=3600)  # the poll that was scheduled comes due: a late poll changes nothing
    assert bot.state(op_id) is S.APPROVAL_SENT
    assert bot.gitlab.count(method="GET", path_contains="/merge_requests/") == reads_before


def test_lost_webhook_the_poll_finds_the_pipeline(bot: Bot) -> None:
    """Without the pipeline webhook the tiered poll notices the result."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id, deliver=False)
    bot.settle(advance=15)
    assert bot.state(op_id) is S.APPROVAL_SENT


@pytest.mark.parametrize("status", ["failed", "canceled"])
def test_failed_pipeline_is_an_explicit_failure(bot: Bot, status: str) -> None:
    """A failed check pipeline stops the request with the failure step and its detail."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id, status=status, deliver=False)
    bot.settle(advance=15)
    assert bot.state(op_id) is S.CREATE_FAILED
    op = operation(bot.services.engine, op_id)
    assert op["step"] == Step.CREATE_PIPELINE_FAILED
    assert status in op["error_detail"]
