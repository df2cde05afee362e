"""The bot on GitLab as it really is (docs/gitlab-behaviour.md): a head pipeline attached late,
merged results pipelines, merged heads per merge method, target-branch signals, waits."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from bot.app.doctor.checklist import MISS, Identity
from bot.app.doctor.projects import check_branch_cleanup, read_membership
from bot.app.doctor.services import check_deliveries
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.render.status import WAIT_WORDS
from bot.store.models import INBOX, utcnow
from jobs.outbox import dispatch
from sim.gitlab import mr_ops
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot
from tests.workflow.test_queue import changes, iid, merges


def test_a_rebased_head_is_not_passed_by_the_older_heads_green_pipeline(bot: Bot) -> None:
    """GitLab attaches a push's pipeline to the MR asynchronously (UpdateHeadPipelineWorker):
    right after the bot's rebase the MR still shows the old head's green pipeline. The bot
    waits for the rebased head's own pipeline, and that one failing stops the merge."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    bot.gitlab.set_pipelines_must_succeed(PROJECT, False)  # GitLab's default: nothing else stops it
    ops = changes(bot, 2)
    second = ops[1]
    assert operation(bot.services.engine, second)["step"] == Step.HANDLE_REBASING
    bot.gitlab.set_async_effects(True, project=PROJECT)
    bot.gitlab.complete_rebase(PROJECT, iid(bot, second), ok=True)
    bot.gitlab.run_effects("mergeability_check", project=PROJECT)
    head = bot.gitlab.mr(PROJECT, iid(bot, second)).sha
    shown = bot.gitlab.shown_head_pipeline(PROJECT, iid(bot, second))
    assert shown is not None
    assert shown.status == "success"
    assert shown.sha != head
    bot.settle(advance=120)  # the rebase's polls and the pipeline wait's first tiers
    assert merges(bot, second) == 0
    assert bot.state(second) is S.MERGING
    bot.gitlab.run_effects("attach_head_pipeline", project=PROJECT)
    bot.pass_pipeline(second, "failed")
    bot.settle()
    assert merges(bot, second) == 0
    assert bot.state(second) is not S.MERGED
    assert bot.gitlab.mr(PROJECT, iid(bot, second)).state == "opened"


def test_a_merged_results_pipeline_passes_the_head_it_was_built_from(bot: Bot) -> None:
    """Merged results pipelines run on the merge-ref commit (parents: the target's head, the
    MR's head), so their hook's `sha` is not the head's: it still passes the wait at once,
    not at the fallback poll five minutes later."""
    bot.gitlab.set_merged_results(PROJECT)
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    mr_iid = operation(bot.services.engine, op_id)["mr_iid"]
    pipeline = bot.gitlab.latest_pipeline(PROJECT, mr_iid)
    assert pipeline is not None
    assert pipeline.sha != bot.gitlab.mr(PROJECT, mr_iid).sha
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED


def deliver(bot: Bot, kind: str, **what: Any) -> None:
    """GitLab delivers a webhook of the double's current state to the bot, which takes it."""
    headers, body = bot.gitlab.webhook(kind, project=PROJECT, token=SECRETS["webhook"], **what)
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code < 300


def _merged_by_a_person_hook_first(bot: Bot, method: str, *, squash: bool = False) -> str:
    """An approve-first change in MERGING whose MR a person merges (merge method `method`),
    GitLab's merge hook reaching the bot before its own step looks; the operation id."""
    bot.gitlab.set_merge_method(PROJECT, method)
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    mr_iid = operation(bot.services.engine, op_id)["mr_iid"]
    bot.gitlab.set_merge_status(PROJECT, mr_iid, "checking")  # the bot's merge waits
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGING
    bot.gitlab.set_merge_status(PROJECT, mr_iid, None)
    with bot.gitlab.lock:
        state = bot.gitlab.state
        project = bot.gitlab.project(PROJECT)
        mr_ops.merge(
            state, project, state.mr(project, mr_iid), bot.gitlab.user("root"), squash=squash
        )
    deliver(bot, "merge_request", iid=mr_iid, action="merge")
    bot.settle()
    return op_id


def test_a_fast_forward_merge_records_the_head_that_landed_and_its_deployment_validates(
    bot: Bot,
) -> None:
    """A fast-forward merge makes no merge commit: GitLab's merge hook says
    `merge_commit_sha: null`. The bot records the head the target now points at, and the
    production deployment of that commit puts the change in effect at once."""
    op_id = _merged_by_a_person_hook_first(bot, "ff")
    mr_iid = operation(bot.services.engine, op_id)["mr_iid"]
    landed = bot.gitlab.project(PROJECT).branches["main"]
    assert bot.gitlab.mr(PROJECT, mr_iid).merge_commit_sha is None
    assert operation(bot.services.engine, op_id)["merge_commit_sha"] == landed
    _deliver_deployment(bot, "production", landed, "main")
    assert bot.state(op_id) is S.VALIDATED


def test_a_squash_merge_records_the_squash_commit_the_hook_does_not_carry(bot: Bot) -> None:
    """A squashed fast-forward merge lands GitLab's squash commit, reported only by the API's
    `squash_commit_sha` (the merge hook does not carry it): the bot records that commit."""
    op_id = _merged_by_a_person_hook_first(bot, "ff", squash=True)
    mr = bot.gitlab.mr(PROJECT, operation(bot.services.engine, op_id)["mr_iid"])
    landed = bot.gitlab.project(PROJECT).branches["main"]
    assert mr.merge_commit_sha is None
    assert landed != mr.sha
    assert operation(bot.services.engine, op_id)["merge_commit_sha"] == landed


def _deliver_deployment(bot: Bot, environment: str, sha: str, ref: str) -> None:
    deployment = bot.gitlab.deploy(PROJECT, environment=environment, sha=sha, ref=ref)
    deliver(bot, "deployment", deployment_id=deployment.id)
    bot.settle()


def test_a_staging_deployment_of_the_merged_commit_validates_nothing(bot: Bot) -> None:
    """Only deployments to an environment that puts changes in effect count: GitLab's
    production tier by default (GITOPS_DEPLOY_ENVIRONMENTS names them otherwise). A staging
    deployment of exactly the merged commit leaves the change MERGED; production ends it."""
    op_id = _merged_by_a_person_hook_first(bot, "merge")
    merged = operation(bot.services.engine, op_id)["merge_commit_sha"]
    assert merged is not None
    _deliver_deployment(bot, "staging", merged, "main")
    assert bot.state(op_id) is S.MERGED
    _deliver_deployment(bot, "production", merged, "main")
    assert bot.state(op_id) is S.VALIDATED


def test_named_deploy_environments_replace_the_production_tier(make_bot: Any) -> None:
    """With GITOPS_DEPLOY_ENVIRONMENTS=live-eu, a `production` deployment does not count and
    a `live-eu` one does."""
    bot = make_bot(deploy_environments=("live-eu",))
    op_id = _merged_by_a_person_hook_first(bot, "merge")
    merged = operation(bot.services.engine, op_id)["merge_commit_sha"]
    _deliver_deployment(bot, "production", merged, "main")
    assert bot.state(op_id) is S.MERGED
    _deliver_deployment(bot, "live-eu", merged, "main")
    assert bot.state(op_id) is S.VALIDATED


def test_a_pipeline_on_another_branch_at_the_merged_commit_validates_nothing(bot: Bot) -> None:
    """A successful branch pipeline counts only on the change's target branch: the same commit
    pushed to another branch and passing there leaves the change MERGED."""
    op_id = _merged_by_a_person_hook_first(bot, "merge")
    merged = operation(bot.services.engine, op_id)["merge_commit_sha"]
    with bot.gitlab.lock:
        bot.gitlab.project(PROJECT).branches["copy"] = merged
    pipeline = bot.gitlab.run_branch_pipeline(PROJECT, "copy")
    assert pipeline is not None
    bot.gitlab.set_pipeline(PROJECT, pipeline.id, "success")
    deliver(bot, "pipeline", pipeline_id=pipeline.id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED


def _approved_and_passed(bot: Bot) -> tuple[str, int]:
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    mr_iid = operation(bot.services.engine, op_id)["mr_iid"]
    return op_id, mr_iid


@pytest.mark.parametrize("status", ["status_checks_must_pass", "merge_time"])
def test_gitlab_statuses_that_mean_wait_wait_and_then_merge(bot: Bot, status: str) -> None:
    """`status_checks_must_pass` (external status checks not all passed yet) and `merge_time`
    (the MR's merge_after not reached) pass by themselves: the bot waits, and merges once
    GitLab lets it -- it does not stop with MERGE_ERROR -- and the status comment says what
    GitLab waits for."""
    op_id, mr_iid = _approved_and_passed(bot)
    bot.gitlab.set_merge_status(PROJECT, mr_iid, status)
    bot.pass_pipeline(op_id)
    bot.settle(advance=30)
    assert bot.state(op_id) is S.MERGING
    assert bot.gitlab.mr(PROJECT, mr_iid).state == "opened"
    dispatch()  # the status comment says what GitLab waits for
    (note,) = [n for n in bot.gitlab.mr(PROJECT, mr_iid).notes.values() if "GitOps" in n.body]
    assert f"- **Waiting for GitLab:** `{status}`: {WAIT_WORDS[status]}" in note.body
    bot.gitlab.set_merge_status(PROJECT, mr_iid, None)
    bot.settle(advance=600)
    assert bot.state(op_id) is S.MERGED


def test_a_canceled_pipeline_fails_the_wait_on_the_hook_as_on_the_poll(bot: Bot) -> None:
    """A pipeline GitLab reports `canceled` never succeeds: its webhook ends the wait (before,
    the hook was ignored and only a poll five minutes later saw the failure)."""
    op_id, mr_iid = _approved_and_passed(bot)
    bot.pass_pipeline(op_id, "canceled")
    bot.settle()
    assert bot.state(op_id) is S.CREATE_FAILED
    assert bot.gitlab.mr(PROJECT, mr_iid).state == "opened"


@pytest.mark.parametrize("status", ["canceling", "waiting_for_callback"])
def test_pipelines_canceling_or_waiting_for_callback_are_waited_for(bot: Bot, status: str) -> None:
    """`canceling` (17.0+) and `waiting_for_callback` (16.6+) are not final: the change waits
    for the pipeline's last word, whether a poll or a hook brings it."""
    op_id, mr_iid = _approved_and_passed(bot)
    pipeline = bot.gitlab.latest_pipeline(PROJECT, mr_iid)
    assert pipeline is not None
    bot.gitlab.set_pipeline(PROJECT, pipeline.id, status)
    deliver(bot, "pipeline", iid=mr_iid, pipeline_id=pipeline.id)
    bot.settle(advance=400)  # polls too
    assert bot.state(op_id) is S.MR_CREATING
    bot.pass_pipeline(op_id, "success")
    bot.settle()
    assert bot.state(op_id) is S.MERGED


def test_an_mr_edit_with_the_largest_description_gitlab_allows_is_taken_in(bot: Bot) -> None:
    """GitLab allows 1,048,576 characters of MR description and an edit's hook carries it
    three times (the MR's, `changes.description` previous and current): JSON-escaped, up to
    37.7 MB. Four such edits in a row are all answered 2xx and none is
    quarantined (a 4xx for each would have GitLab disable the hook)."""
    _, mr_iid = _approved_and_passed(bot)
    statuses = []
    for n in range(4):
        text = ("é" if n % 2 else "\U0001f600") * 1_048_576  # JSON: 6 and 12 bytes each
        previous = bot.gitlab.mr(PROJECT, mr_iid).description
        with bot.gitlab.lock:
            bot.gitlab.mr(PROJECT, mr_iid).description = text
        headers, body = bot.gitlab.webhook(
            "merge_request",
            project=PROJECT,
            iid=mr_iid,
            action="update",
            changes={"description": {"previous": previous, "current": text}},
            token=SECRETS["webhook"],
            idempotency_key=f"edit-{n}",
        )
        assert len(body) > 4_000_000
        statuses.append(bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code)
    assert all(200 <= status < 300 for status in statuses), statuses
    with bot.services.engine.connect() as conn:
        kept = conn.execute(
            select(INBOX.c.status).where(INBOX.c.delivery_key.like("gitlab:edit-%"))
        ).scalars()
        found = list(kept)
    assert len(found) == 4
    assert "quarantined" not in found, reasons(bot)


def reasons(bot: Bot) -> list[str | None]:
    """The reasons of the quarantined deliveries."""
    with bot.services.engine.connect() as conn:
        query = select(INBOX.c.reason).where(INBOX.c.status == "quarantined")
        return list(conn.execute(query).scalars())


def test_an_oversized_delivery_is_answered_2xx_and_shown_by_doctor_and_the_dashboard(
    make_bot: Any,
) -> None:
    """An authenticated delivery over GITOPS_WEBHOOK_MAX_BODY_BYTES: 2xx (never the 413 that
    counts toward GitLab disabling the hook), quarantined with its size, named by `doctor`
    (a miss, with the fix) and by a banner on the dashboard; a wrong token is still 401."""
    bot = make_bot(webhook_max_body_bytes=50_000)
    _, mr_iid = _approved_and_passed(bot)
    headers, body = bot.gitlab.webhook(
        "merge_request", project=PROJECT, iid=mr_iid, token=SECRETS["webhook"], action="update"
    )
    padded = body[:-1] + b', "padding": "' + b"x" * 60_000 + b'"}'
    answer = bot.client.post("/webhooks/gitlab", data=padded, headers=headers)
    assert answer.status_code == 200
    assert answer.get_json() == {"status": "quarantined"}
    wrong = {**headers, "X-Gitlab-Token": "wrong"}
    assert bot.client.post("/webhooks/gitlab", data=padded, headers=wrong).status_code == 401
    check = check_deliveries(bot.services, utcnow(), database_ok=True)
    assert check.status == MISS
    assert f"body of {len(padded)} bytes over GITOPS_WEBHOOK_MAX_BODY_BYTES (50000)" in (
        check.detail
    )
    page = bot.client.get("/", headers={"Authorization": "Bearer api-token"})
    assert page.status_code == 200
    assert "1 webhook delivery\n  quarantined in the last 24 h" in page.get_data(as_text=True)


def test_the_merged_bot_branch_is_deleted_by_a_maintainer_author(bot: Bot) -> None:
    """GitLab keeps a protected source branch on merge (`can_remove_source_branch?`): the bot
    deletes its merged `gitops/<id>` branch itself, its author account being Maintainer."""
    bot.gitlab.protect_branch(PROJECT, "gitops/*", push=("gitops-bot",))  # as `hooks install`
    op_id, _ = _approved_and_passed(bot)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    assert f"gitops/{op_id}" in bot.gitlab.project(PROJECT).branches  # GitLab kept it
    dispatch()  # the outbox
    assert f"gitops/{op_id}" not in bot.gitlab.project(PROJECT).branches


def test_a_developer_author_keeps_merged_branches_and_doctor_says_why(bot: Bot) -> None:
    """A Developer may not delete a protected branch (400): the merged branch is kept, the
    change goes on, and doctor names the missing right and its fix."""
    bot.gitlab.add_member(PROJECT, "gitops-bot", 30)
    bot.gitlab.protect_branch(PROJECT, "main", merge=(30,))  # Developers may merge there
    bot.gitlab.protect_branch(PROJECT, "gitops/*", push=("gitops-bot",))
    op_id, _ = _approved_and_passed(bot)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    assert dispatch().failed == 0  # the outbox: the refusal is said, not retried
    assert f"gitops/{op_id}" in bot.gitlab.project(PROJECT).branches
    author = bot.services.require_clients().author
    user = bot.gitlab.user("gitops-bot")
    who = Identity("author", author, user.id, user.username)
    cleanup = check_branch_cleanup(PROJECT, read_membership(PROJECT, who))
    assert cleanup.name == f"delete merged branches {PROJECT}"
    assert cleanup.status == MISS
    assert "may not delete protected branches" in cleanup.detail
    assert "Maintainer" in cleanup.fix
