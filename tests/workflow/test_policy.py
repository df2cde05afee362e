"""Each repository's `.gitops/bot.yml`, read at the target branch's head commit when an API
change starts: two projects with different files are held to different paths in one run (the
step order is the operator's flag), a broken or loosening file refuses with its line and column,
and a change in flight keeps the policy it started with."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from werkzeug.test import TestResponse

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store import queue
from bot.store.flags import set_flag
from bot.store.models import OPERATIONS, utcnow
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot

AUTH = {"Authorization": "Bearer api-token"}
OTHER = "platform/apps"
#: PROJECT's policy: config/ only
CONFIG_ONLY = "version: 1\npaths:\n  allowed: [config/]\n"
#: OTHER's policy: apps/ only
APPS_ONLY = "paths: {allowed: [apps/]}\n"


def submit(bot: Bot, project: str, path: str, subject: str = "svc") -> TestResponse:
    """POST /api/v1/changes writing `path` in `project`'s main."""
    body: dict[str, Any] = {
        "subject_id": subject,
        "target_key": path.lstrip("."),
        "project": project,
        "target_branch": "main",
        "title": f"Change {path}",
        "requested_by": "alice",
        "files": [{"path": path, "content": "replicas: 2\n"}],
    }
    return bot.client.post("/api/v1/changes", json=body, headers=AUTH)


def accepted(bot: Bot, answer: TestResponse) -> str:
    """The operation id of a 202."""
    assert answer.status_code == 202, answer.get_json()
    return str(answer.get_json()["operation_id"])


def second_project(bot: Bot, policy: str | None) -> None:
    """OTHER, with `policy` as its .gitops/bot.yml, the bot and approvers Maintainers there."""
    files = {"apps/web.yaml": "replicas: 1\n"}
    if policy is not None:
        files[".gitops/bot.yml"] = policy
    bot.gitlab.add_project(OTHER, files=files)
    for user in ("gitops-bot", "approver-1", "approver-2"):
        bot.gitlab.add_member(OTHER, user, 40)


def test_two_projects_with_different_policies_in_one_run(bot: Bot) -> None:
    """PROJECT allows config/, OTHER apps/: each change follows its own project's file and
    records the commit it was read at; the operator's order flag, MR first for the first
    submission and approval first for the second, decides each one's order."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": CONFIG_ONLY})
    second_project(bot, APPS_ONLY)
    set_flag(bot.services.engine, "workflow.order", "mr_first")
    ours = accepted(bot, submit(bot, PROJECT, "config/prod.yaml"))
    set_flag(bot.services.engine, "workflow.order", "approve_first")
    theirs = accepted(bot, submit(bot, OTHER, "apps/web.yaml"))
    for project, path in ((PROJECT, "apps/web.yaml"), (OTHER, "config/prod.yaml")):
        refused = submit(bot, project, path, subject="elsewhere")
        assert (refused.status_code, refused.get_json()["error"]) == (422, "invalid_path")
    assert operation(bot.services.engine, ours)["flow"] is Flow.MR_FIRST
    assert operation(bot.services.engine, theirs)["flow"] is Flow.APPROVE_FIRST
    assert operation(bot.services.engine, ours)["policy"] == {"paths": {"allowed": ["config/"]}}
    bot.settle()
    assert bot.gitlab.project(PROJECT).mrs != {}  # the MR first
    assert bot.gitlab.project(OTHER).mrs == {}  # approval first: no MR yet
    assert {s["operation_id"] for s in bot.approvals.submitted} == {theirs}
    for op_id, project in ((ours, PROJECT), (theirs, OTHER)):
        view = bot.client.get(f"/api/v1/changes/{op_id}", headers=AUTH).get_json()
        assert view["policy_commit"] == operation(bot.services.engine, op_id)["policy_sha"]
        assert view["policy_commit"] == bot.gitlab.branch_head(project, "main")


def test_no_policy_file_means_the_environment_and_is_recorded_as_such(bot: Bot) -> None:
    """Without the file the flag's order and GITOPS_ALLOWED_PATHS (unset: any safe path) apply;
    the target's head commit is recorded (the branch read once: the file was looked for there),
    and the policy is null."""
    head = bot.gitlab.branch_head(PROJECT, "main")
    op_id = accepted(bot, submit(bot, PROJECT, "apps/web.yaml"))
    op = operation(bot.services.engine, op_id)
    assert (op["policy_sha"], op["policy"], op["flow"]) == (head, None, Flow.APPROVE_FIRST)
    assert bot.gitlab.count("GET", path_endswith="/repository/branches/main") == 1
    view = bot.client.get(f"/api/v1/changes/{op_id}", headers=AUTH).get_json()
    assert view["policy_commit"] == head


def test_a_broken_policy_refuses_new_changes_naming_line_and_column(bot: Bot) -> None:
    """A value the schema refuses: 422 policy_invalid with file:line:col; nothing recorded."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "version: 1\ndeploy:\n  timeout: up\n"})
    answer = submit(bot, PROJECT, "config/prod.yaml")
    body = answer.get_json()
    assert (answer.status_code, body["error"]) == (422, "policy_invalid")
    assert ".gitops/bot.yml:3:12: deploy.timeout:" in body["detail"]
    assert body["problems"][0].startswith(".gitops/bot.yml:3:12: ")
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: [config/\n"})
    answer = submit(bot, PROJECT, "config/prod.yaml")
    assert answer.get_json()["detail"].startswith(
        "the project's policy file refuses new changes: .gitops/bot.yml:2:1: "
    )
    listed = bot.client.get("/api/v1/changes", headers=AUTH).get_json()
    assert listed["changes"] == []


def test_a_policy_changed_mid_flight_does_not_alter_the_change_in_flight(bot: Bot) -> None:
    """The file moves from config/ to apps/ after a change was accepted: the change goes on to
    approval under the policy it started with; a new change is held to the new file."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: [config/]}\n"})
    first = bot.gitlab.branch_head(PROJECT, "main")
    op_id = accepted(bot, submit(bot, PROJECT, "config/prod.yaml"))
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: [apps/]}\n"})
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["policy_sha"]) == (S.APPROVAL_SENT, first)
    assert op["step"] != Step.CREATE_PATH_REFUSED
    refused = submit(bot, PROJECT, "config/prod.yaml", subject="later")
    assert refused.get_json()["error"] == "invalid_path"
    assert accepted(bot, submit(bot, PROJECT, "apps/web.yaml", subject="later"))


def test_the_policy_file_is_protected_from_api_changes(bot: Bot) -> None:
    """A change writing .gitops/bot.yml, or a path the file protects, through the API is
    refused: it needs Maintainer, which an API request does not state."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {protected: [config/prod/]}\n"})
    for path in (".gitops/bot.yml", "config/prod/db.yaml"):
        answer = submit(bot, PROJECT, path, subject=path.lstrip("."))
        body = answer.get_json()
        assert (answer.status_code, body["error"]) == (422, "protected_path")
        assert "needs Maintainer" in body["detail"]
    assert accepted(bot, submit(bot, PROJECT, "config/staging/db.yaml"))


def test_the_files_poll_tiers_and_deploy_timeout_apply_to_its_changes(bot: Bot) -> None:
    """PROJECT polls its pipelines every 15 s (no more often than the flag's 10 s, stopping
    sooner) and waits 120 s for the deployment; OTHER, without a file, keeps the flag's first
    tier (10 s)."""
    tiers = "poll: {pipeline_tiers: [[15, 3]]}\ndeploy: {timeout: 120}\n"
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": tiers})
    second_project(bot, None)
    set_flag(bot.services.engine, "workflow.order", "mr_first")
    ours = accepted(bot, submit(bot, PROJECT, "config/prod.yaml"))
    theirs = accepted(bot, submit(bot, OTHER, "apps/web.yaml"))
    before = utcnow()
    bot.settle()
    step_timeout = bot.settings.step_timeout
    for op_id, interval in ((ours, 15), (theirs, 10)):
        deadline = operation(bot.services.engine, op_id)["deadline_at"].replace(tzinfo=UTC)
        wait = timedelta(seconds=interval + step_timeout)
        assert before + wait <= deadline <= utcnow() + wait
    bot.pass_pipeline(ours)
    bot.settle()
    assert bot.approve(ours) == 202
    merged_at = utcnow()
    bot.settle()
    assert bot.state(ours) is S.MERGED
    deadline = operation(bot.services.engine, ours)["deadline_at"].replace(tzinfo=UTC)
    assert merged_at + timedelta(seconds=120) <= deadline <= utcnow() + timedelta(seconds=120)


def test_the_files_approver_accounts_are_the_ones_that_approve(make_bot: Any) -> None:
    """GITOPS_APPROVALS_REQUIRED=1 of two accounts: `approvals: {approvers: [approver-2]}`
    picks which one, and only approver-2 approves the MR."""
    bot = make_bot(approvals_required=1)
    set_flag(bot.services.engine, "workflow.order", "mr_first")
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "approvals: {approvers: [approver-2]}\n"})
    op_id = accepted(bot, submit(bot, PROJECT, "config/prod.yaml"))
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.approve(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    assert bot.gitlab.mr(PROJECT, iid).approvals == [bot.gitlab.user("approver-2").id]


def test_a_recorded_policy_without_the_merge_queue_still_waits_in_line(
    bot: Bot,
) -> None:
    """`merge_queue: {enabled: false}` recorded on three changes (before such a file was
    refused) approved together on a fast-forward project: the queue is the operator's, so the
    first merges and the two behind it wait in line, neither rebasing yet."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    off = {"merge_queue": {"enabled": False}}
    ops = [
        bot.request(
            subject_id=f"svc-{i}",
            target_key=f"config/svc-{i}.yaml",
            files=[{"path": f"config/svc-{i}.yaml", "content": "replicas: 3\n"}],
            policy=off,
        )
        for i in range(3)
    ]
    bot.settle()
    for op_id in ops:
        bot.approve(op_id)
    bot.settle()
    for op_id in ops:
        bot.pass_pipeline(op_id)
        bot.settle()
    assert bot.state(ops[0]) is S.MERGED
    head, behind = (queue.place(bot.services.engine, op_id) for op_id in ops[1:])
    assert head is not None
    assert head.is_head  # the next in line: it rebases now
    assert behind is not None
    assert not behind.is_head
    assert operation(bot.services.engine, ops[2])["step"] != Step.HANDLE_REBASING


def test_approvals_the_configured_accounts_cannot_give_fail_the_change_saying_why(
    make_bot: Any,
) -> None:
    """The file names an approver account the bot does not have (one name, as many as the
    server requires): the change stops naming the policy file instead of merging with fewer
    approvals."""
    bot = make_bot(approvals_required=1)
    set_flag(bot.services.engine, "workflow.order", "mr_first")
    text = "approvals: {approvers: [someone-else]}\n"
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": text})
    op_id = accepted(bot, submit(bot, PROJECT, "config/prod.yaml"))
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.approve(op_id) == 202
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert bot.state(op_id) is S.HANDLE_FAILED
    assert "policy file's approvals.approvers (someone-else) matches 0" in op["error_detail"]
    assert bot.gitlab.mr(PROJECT, op["mr_iid"]).approvals == []


def test_a_repeated_request_is_answered_as_the_first_whatever_the_file_says_now(
    bot: Bot,
) -> None:
    """The same Idempotency-Key after the file broke: the first operation again (202), not a
    policy refusal; a new key is refused."""
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: [config/]}\n"})
    body: dict[str, Any] = {
        "subject_id": "svc",
        "target_key": "config/prod.yaml",
        "project": PROJECT,
        "target_branch": "main",
        "title": "Scale",
        "requested_by": "alice",
        "files": [{"path": "config/prod.yaml", "content": "replicas: 2\n"}],
    }
    first = accepted(
        bot,
        bot.client.post("/api/v1/changes", json=body, headers={**AUTH, "Idempotency-Key": "k1"}),
    )
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: [broken\n"})
    again = bot.client.post("/api/v1/changes", json=body, headers={**AUTH, "Idempotency-Key": "k1"})
    assert accepted(bot, again) == first
    other = bot.client.post("/api/v1/changes", json=body, headers={**AUTH, "Idempotency-Key": "k2"})
    assert other.get_json()["error"] == "policy_invalid"


def test_the_policy_files_validators_check_the_change_before_approval(bot: Bot) -> None:
    """The file's `validators` name a JSON Schema in the repository for config/**: a change
    breaking it stops in CREATE_FAILED at the value's line and column, and nobody is asked;
    the same change to a project whose file names no schema goes on to the approval request."""
    schema = '{"type": "object", "properties": {"replicas": {"maximum": 10}}}'
    rules = "validators:\n  - glob: 'config/**'\n    schema: schemas/app.json\n"
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": rules, "schemas/app.json": schema})
    second_project(bot, "paths: {allowed: [config/]}\n")
    body: dict[str, Any] = {
        "subject_id": "svc",
        "target_key": "config/prod.yaml",
        "target_branch": "main",
        "title": "Scale",
        "requested_by": "alice",
        "files": [{"path": "config/prod.yaml", "content": "# scaled\nreplicas: 30\n"}],
    }
    ours = accepted(
        bot, bot.client.post("/api/v1/changes", json={**body, "project": PROJECT}, headers=AUTH)
    )
    theirs = accepted(
        bot,
        bot.client.post(
            "/api/v1/changes", json={**body, "project": OTHER, "subject_id": "other"}, headers=AUTH
        ),
    )
    bot.settle()
    op = operation(bot.services.engine, ours)
    assert (bot.state(ours), op["step"]) == (S.CREATE_FAILED, Step.CREATE_CHECKS_FAILED)
    assert "config/prod.yaml:2:11: schema schemas/app.json: 30 is greater than" in str(
        op["error_detail"]
    )
    assert [s["operation_id"] for s in bot.approvals.submitted] == [theirs]


# -- a policy file tightens the operator's environment, never loosens it ---------------------------


def operator_allows(bot: Bot, *paths: str) -> None:
    """The operator sets GITOPS_ALLOWED_PATHS (read per request, as a restart would)."""
    bot.services.settings = replace(bot.settings, allowed_paths=paths)


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        (".gitlab-ci.yml", ".gitlab-ci.yml"),
        (".gitlab/", ".gitlab/agents/prod/config.yaml"),
        ("CODEOWNERS", "CODEOWNERS"),
        (".gitops/bot.yml", ".gitops/bot.yml"),
    ],
)
def test_a_policy_naming_a_protected_path_is_refused_with_its_position(
    bot: Bot, entry: str, path: str
) -> None:
    """`paths.allowed` naming a built-in protected path unlocked it for API submissions (202);
    such a file is now refused like a broken one: 422 policy_invalid at the entry's line and
    column, nothing recorded."""
    text = f"version: 1\npaths:\n  allowed: [config/, {entry}]\n"
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": text})
    answer = submit(bot, PROJECT, path)
    body = answer.get_json()
    assert (answer.status_code, body["error"]) == (422, "policy_invalid"), body
    assert body["problems"][0].startswith(".gitops/bot.yml:3:22: paths.allowed.1: ")
    assert "may only narrow the allowed paths" in body["detail"]
    assert bot.client.get("/api/v1/changes", headers=AUTH).get_json()["changes"] == []


def test_an_empty_allowed_list_does_not_widen_the_operators_paths(bot: Bot) -> None:
    """`allowed: []` meant any safe path, whatever GITOPS_ALLOWED_PATHS said; it now adds no
    restriction of its own: the operator's paths hold."""
    operator_allows(bot, "config/")
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: []}\n"})
    refused = submit(bot, PROJECT, "apps/web.yaml")
    assert (refused.status_code, refused.get_json()["error"]) == (422, "invalid_path")
    assert accepted(bot, submit(bot, PROJECT, "config/prod.yaml"))


def test_a_path_must_be_allowed_by_both_the_operator_and_the_policy(bot: Bot) -> None:
    """GITOPS_ALLOWED_PATHS=config/ and the file's [config/prod/, apps/]: only config/prod/
    is allowed by both; apps/ (the file's alone) and config/staging/ (the operator's alone) are
    refused."""
    operator_allows(bot, "config/")
    text = "paths: {allowed: [config/prod/, apps/]}\n"
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": text})
    for path in ("apps/web.yaml", "config/staging/db.yaml"):
        refused = submit(bot, PROJECT, path, subject=path)
        assert (refused.status_code, refused.get_json()["error"]) == (422, "invalid_path"), path
    assert accepted(bot, submit(bot, PROJECT, "config/prod/db.yaml"))


def test_a_policy_sharing_no_path_with_the_operator_allows_nothing(bot: Bot) -> None:
    """GITOPS_ALLOWED_PATHS=config/ and the file's [apps/]: no path is allowed by both, which
    is not the empty list's "any path"."""
    operator_allows(bot, "config/")
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: [apps/]}\n"})
    for path in ("apps/web.yaml", "config/prod.yaml", "other/x.yaml"):
        refused = submit(bot, PROJECT, path, subject=path)
        assert (refused.status_code, refused.get_json()["error"]) == (422, "invalid_path"), path


def test_a_ci_include_the_policy_names_stays_protected(bot: Bot) -> None:
    """The CI configuration includes ci/build.yml; the file's `allowed: [config/, ci/build.yml]`
    named it exactly, which unlocked it (only the operator's list may): the change stops
    before approval naming it."""
    ci = "include:\n  - local: ci/build.yml\n"
    text = "paths: {allowed: [config/, ci/build.yml]}\n"
    bot.gitlab.push(PROJECT, "main", {".gitlab-ci.yml": ci, ".gitops/bot.yml": text})
    op_id = accepted(bot, submit(bot, PROJECT, "ci/build.yml"))
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.CREATE_FAILED, Step.CREATE_PATH_REFUSED)
    assert "ci/build.yml: is included by the CI configuration" in op["error_detail"]
    assert bot.approvals.submitted == []


def test_the_operator_may_still_unlock_a_protected_path(bot: Bot) -> None:
    """GITOPS_ALLOWED_PATHS naming .gitlab-ci.yml unlocks it (the operator's choice); a policy
    that narrows to config/ takes it away again, one that leaves paths out keeps it."""
    operator_allows(bot, "config/", ".gitlab-ci.yml")
    assert accepted(bot, submit(bot, PROJECT, ".gitlab-ci.yml"))
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": "paths: {allowed: [config/]}\n"})
    refused = submit(bot, PROJECT, ".gitlab-ci.yml", subject="again")
    assert refused.status_code == 422


# -- two projects, different command levels and approvals, in one run -----------------------------

#: PROJECT's policy: only Maintainers apply; one approval, from approver-2
STRICT = "commands:\n  min_access: {apply: maintainer}\napprovals: {approvers: [approver-2]}\n"
#: OTHER's policy: the default command levels; two approvals
TWO_APPROVALS = "approvals: {required: 2}\n"


def comment(bot: Bot, project: str, iid: int, user: str, body: str) -> int:
    """`user` comments on `project`'s MR !iid, its Note Hook is delivered, the jobs run; the
    note's id."""
    note = bot.gitlab.add_note(project, iid, user, body)
    headers, data = bot.gitlab.webhook(
        "note", project=project, iid=iid, note_id=note.id, token=SECRETS["webhook"]
    )
    assert bot.client.post("/webhooks/gitlab", data=data, headers=headers).status_code < 300
    bot.settle()
    return note.id


def reaction(bot: Bot, project: str, iid: int, note_id: int) -> list[str]:
    """The emoji the bot awarded on a note."""
    return [a.name for a in bot.gitlab.mr(project, iid).notes[note_id].awards]


def operation_of(bot: Bot, project: str, iid: int) -> str | None:
    """The id of the operation carrying `project`'s MR !iid (None: none)."""
    query = select(OPERATIONS.c.id).where(
        OPERATIONS.c.project == project, OPERATIONS.c.mr_iid == iid
    )
    with bot.services.engine.connect() as conn:
        return conn.execute(query).scalar_one_or_none()


def pipeline_passes(bot: Bot, project: str, iid: int) -> None:
    """The MR's head pipeline succeeds and its Pipeline Hook is delivered."""
    pipeline = bot.gitlab.latest_pipeline(project, iid)
    assert pipeline is not None
    bot.gitlab.set_pipeline(project, pipeline.id, "success")
    headers, data = bot.gitlab.webhook(
        "pipeline", project=project, iid=iid, pipeline_id=pipeline.id, token=SECRETS["webhook"]
    )
    assert bot.client.post("/webhooks/gitlab", data=data, headers=headers).status_code < 300
    bot.settle()


def test_two_projects_with_different_command_levels_and_approvals_in_one_run(
    make_bot: Any,
) -> None:
    """GITOPS_APPROVALS_REQUIRED=1: PROJECT's file raises `apply` to Maintainer and picks
    approver-2 for its one approval; OTHER's keeps the levels and asks for two. The same
    Developer (not the MRs' author) is refused in PROJECT and allowed in OTHER; PROJECT's change
    merges with approver-2's approval alone, OTHER's with both approver accounts'."""
    bot = make_bot(approvals_required=1)
    bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": STRICT})
    second_project(bot, TWO_APPROVALS)
    for user, level in (("alice", 30), ("dave", 30), ("maria", 40)):
        bot.gitlab.add_user(user, access={PROJECT: level, OTHER: level})
    ours = bot.gitlab.open_mr(
        PROJECT, "feature", author="alice", files={"config/prod.yaml": "replicas: 3\n"}
    ).iid
    theirs = bot.gitlab.open_mr(
        OTHER, "feature", author="alice", files={"apps/web.yaml": "replicas: 3\n"}
    ).iid

    refused = comment(bot, PROJECT, ours, "dave", "/gitops apply")
    allowed = comment(bot, OTHER, theirs, "dave", "/gitops apply")
    assert reaction(bot, PROJECT, ours, refused) == ["no_entry_sign"]
    assert operation_of(bot, PROJECT, ours) is None
    assert reaction(bot, OTHER, theirs, allowed) == ["eyes"]
    comment(bot, PROJECT, ours, "maria", "/gitops apply")
    ours_id, theirs_id = operation_of(bot, PROJECT, ours), operation_of(bot, OTHER, theirs)
    assert ours_id is not None
    assert theirs_id is not None

    for project, iid in ((PROJECT, ours), (OTHER, theirs)):
        pipeline_passes(bot, project, iid)
    for op_id in (ours_id, theirs_id):
        assert bot.approve(op_id) == 202
    bot.settle()
    assert (bot.state(ours_id), bot.state(theirs_id)) == (S.MERGED, S.MERGED)
    approver = {n: bot.gitlab.user(f"approver-{n}").id for n in (1, 2)}
    assert bot.gitlab.mr(PROJECT, ours).approvals == [approver[2]]
    assert sorted(bot.gitlab.mr(OTHER, theirs).approvals) == sorted(approver.values())
