"""MR commands under the project's `.gitops/bot.yml`: its command levels, its protected paths
(the policy file itself needs a Maintainer), a broken file refused with its line and column, and
the status comment naming the policy commit the change follows."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.store.flags import set_flag
from bot.store.models import OPERATIONS
from tests.builders import operation
from tests.commands import (
    AUTHOR,
    awards,
    bot_notes,
    carry,
    flush_outbox,
    operations_of,
    person_mr,
    replies,
    running_bot,
    say,
    to_validated,
)
from tests.workflow.harness import PROJECT, Bot

MAINTAINER = "maria"


def policy(bot: Bot, text: str) -> str:
    """Puts `text` as .gitops/bot.yml on main; the new head."""
    return bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": text})


def test_the_files_command_levels_decide_who_may_apply(bot: Bot) -> None:
    """`apply: maintainer` in the file: a Developer (not the MR's author) is refused, a
    Maintainer is not (the flag's default lets Developers apply)."""
    policy(bot, "commands:\n  min_access: {apply: maintainer}\n")
    iid = person_mr(bot)
    refused = say(bot, "dave", "/gitops apply", iid)
    assert awards(bot, iid, refused.id) == ["no_entry_sign"]
    assert operations_of(bot, iid) == []
    accepted = say(bot, MAINTAINER, "/gitops apply", iid)
    assert awards(bot, iid, accepted.id) == ["eyes"]
    assert len(operations_of(bot, iid)) == 1


def test_a_broken_policy_refuses_apply_naming_line_and_column(bot: Bot) -> None:
    """The reply names file:line:col and what is wrong; nothing is started."""
    policy(bot, "version: 1\napprovals:\n  required: many\n")
    iid = person_mr(bot)
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "policy file refuses new changes" in reply
    assert ".gitops/bot.yml:3:13: approvals.required:" in reply
    assert operations_of(bot, iid) == []


def test_changing_the_policy_file_needs_a_maintainer(bot: Bot) -> None:
    """An MR editing .gitops/bot.yml: refused for its Developer author, accepted for a
    Maintainer (recorded as such), and then goes through approval and merges like any other
    change."""
    head = policy(bot, "paths: {allowed: [config/]}\n")
    iid = person_mr(bot, files={".gitops/bot.yml": "paths: {allowed: [config/, apps/]}\n"})
    refused = say(bot, AUTHOR, "/gitops apply", iid)
    [reply] = replies(bot, iid)
    assert "`.gitops/bot.yml`: is a protected path (.gitops/); changing it needs " in reply
    assert awards(bot, iid, refused.id) == ["no_entry_sign"]
    say(bot, MAINTAINER, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    assert (op["maintainer_request"], op["policy_sha"]) == (True, head)
    bot.pass_pipeline(op["id"])
    bot.settle()
    assert [s["operation_id"] for s in bot.approvals.submitted] == [op["id"]]
    assert bot.approve(op["id"]) == 202
    bot.settle()
    assert bot.state(op["id"]) is S.MERGED  # the re-check before merging holds it allowed


def test_a_path_the_file_protects_needs_a_maintainer(bot: Bot) -> None:
    """`paths.protected` adds a protected directory: a Developer's MR touching it is refused."""
    policy(bot, "paths:\n  protected: [config/prod/]\n")
    iid = person_mr(bot, files={"config/prod/db.yaml": "size: 2\n"})
    say(bot, AUTHOR, "/gitops apply", iid)
    [reply] = replies(bot, iid)
    assert "`config/prod/db.yaml`: is a protected path (config/prod/)" in reply
    assert operations_of(bot, iid) == []


def test_the_status_comment_names_the_policy_commit(bot: Bot) -> None:
    """The change's status comment says which policy commit it follows."""
    head = policy(bot, "deploy: {timeout: 900}\n")
    iid = person_mr(bot)
    say(bot, AUTHOR, "/gitops apply", iid)
    flush_outbox(bot)
    [status] = [b for b in bot_notes(bot, iid) if "gitops-bot:reply:" not in b]
    assert f"- **Policy:** `.gitops/bot.yml` at `{head[:7]}`" in status


def test_without_a_policy_file_the_status_comment_says_the_defaults_apply(bot: Bot) -> None:
    """No `.gitops/bot.yml` on the target branch: the branch read once for its head commit (the
    one the change starts from, recorded), the file looked for there, no policy recorded, and
    the status comment says the environment's settings apply at that commit."""
    head = bot.gitlab.project(PROJECT).branches["main"]
    iid = person_mr(bot)
    say(bot, AUTHOR, "/gitops apply", iid)
    flush_outbox(bot)
    [op] = operations_of(bot, iid)
    assert (op["policy_sha"], op["policy"]) == (head, None)
    assert bot.gitlab.count("GET", path_endswith="/repository/branches/main") == 1
    [status] = [b for b in bot_notes(bot, iid) if "gitops-bot:reply:" not in b]
    assert f"- **Policy:** defaults (no `.gitops/bot.yml` at `{head[:7]}`)" in status


# -- a Maintainer's /gitops apply is bound to the head the Maintainer applied at ---------------

#: What the Developer pushes after the Maintainer's apply: the policy loosened for everyone.
LOOSENED = "paths: {allowed: [config/, .gitlab-ci.yml]}\ncommands:\n  min_access: {apply: guest}\n"
CHANGED_AFTER = "changed after a Maintainer's /gitops apply; a Maintainer must apply again"


@pytest.mark.parametrize(
    "first",
    [
        {"config/prod.yaml": "replicas: 3\n"},  # nothing Maintainer-only when applied
        {".gitops/bot.yml": "paths: {allowed: [config/, apps/]}\n"},  # a reviewed policy edit
    ],
    ids=["config-then-policy", "policy-then-more-policy"],
)
def test_a_push_after_a_maintainers_apply_loses_the_maintainers_authority(
    bot: Bot, first: dict[str, str | None]
) -> None:
    """The attack of the audit: a Maintainer applies a Developer's MR; before its pipeline
    passes the Developer pushes an edit of .gitops/bot.yml. The head moved
    after the apply, so the Maintainer's authority does not cover it: the change stops before
    anyone is asked to approve, naming the path and why, and main keeps its policy (before the
    fix it merged, and main's policy let Guests apply and allowed .gitlab-ci.yml)."""
    policy(bot, "paths: {allowed: [config/]}\n")
    before = bot.gitlab.file(PROJECT, ".gitops/bot.yml")
    iid = person_mr(bot, files=first)
    say(bot, MAINTAINER, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    applied_at = bot.gitlab.mr(PROJECT, iid).sha
    assert (op["maintainer_request"], op["maintainer_sha"]) == (True, applied_at)
    bot.gitlab.push(PROJECT, "feature", {".gitops/bot.yml": LOOSENED}, author=AUTHOR)
    bot.settle()
    bot.pass_pipeline(op["id"])
    bot.settle()
    if bot.approvals.submitted:  # before the fix: asked, approved, merged
        bot.approve(op["id"])
        bot.settle()
    assert bot.state(op["id"]) is S.CREATE_FAILED
    [row] = operations_of(bot, iid)
    assert row["step"] == Step.CREATE_PATH_REFUSED
    assert row["error_detail"].startswith(".gitops/bot.yml: ")
    assert CHANGED_AFTER in row["error_detail"]
    assert bot.approvals.submitted == []
    assert bot.gitlab.file(PROJECT, ".gitops/bot.yml") == before


def test_a_maintainer_applying_again_binds_the_new_head(bot: Bot) -> None:
    """After the stop the Developer cannot re-apply (the policy file needs Maintainer); the
    Maintainer re-applies at the new head, which has now been seen: it goes through approval
    and merges."""
    policy(bot, "paths: {allowed: [config/]}\n")
    iid = person_mr(bot, files={"config/prod.yaml": "replicas: 3\n"})
    say(bot, MAINTAINER, "/gitops apply", iid)
    [first] = operations_of(bot, iid)
    edit = "paths: {allowed: [config/, apps/]}\n"
    bot.gitlab.push(PROJECT, "feature", {".gitops/bot.yml": edit}, author=AUTHOR)
    bot.settle()
    bot.pass_pipeline(first["id"])
    bot.settle()
    assert bot.state(first["id"]) is S.CREATE_FAILED
    say(bot, AUTHOR, "/gitops apply", iid)
    assert "needs Maintainer" in replies(bot, iid)[-1]
    say(bot, MAINTAINER, "/gitops apply", iid)
    newest = operations_of(bot, iid)[-1]
    assert newest["id"] != first["id"]
    assert newest["maintainer_sha"] == bot.gitlab.mr(PROJECT, iid).sha
    bot.pass_pipeline(newest["id"])
    bot.settle()
    assert [s["operation_id"] for s in bot.approvals.submitted] == [newest["id"]]
    assert bot.approve(newest["id"]) == 202
    bot.settle()
    assert bot.state(newest["id"]) is S.MERGED
    assert bot.gitlab.file(PROJECT, ".gitops/bot.yml") == edit


def test_a_push_without_maintainer_only_paths_keeps_going(bot: Bot) -> None:
    """The head moved after the Maintainer's apply, but only ordinary paths changed: nothing
    needed the Maintainer's authority, so the change goes on to approval as any other."""
    policy(bot, "paths: {allowed: [config/]}\n")
    iid = person_mr(bot, files={"config/prod.yaml": "replicas: 3\n"})
    say(bot, MAINTAINER, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    bot.gitlab.push(PROJECT, "feature", {"config/prod.yaml": "replicas: 4\n"}, author=AUTHOR)
    bot.settle()
    bot.pass_pipeline(op["id"])
    bot.settle()
    assert [s["operation_id"] for s in bot.approvals.submitted] == [op["id"]]


def test_a_request_with_no_head_bound_to_its_maintainer_stops_before_approval(bot: Bot) -> None:
    """A Maintainer's request in flight from before heads were recorded (maintainer_request
    set, no maintainer_sha) cannot show what its Maintainer saw: its policy-file edit is
    refused before approval, saying a Maintainer must apply again (fail closed)."""
    policy(bot, "paths: {allowed: [config/]}\n")
    iid = person_mr(bot, files={".gitops/bot.yml": LOOSENED})
    op_id = carry(bot, iid, maintainer_request=True)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.CREATE_FAILED, Step.CREATE_PATH_REFUSED)
    assert "no merge request head is bound to the Maintainer's /gitops apply" in op["error_detail"]
    assert bot.approvals.submitted == []


def test_the_check_before_merging_holds_the_maintainer_to_the_approved_head(bot: Bot) -> None:
    """Merge integrity checks the path policy again before approving and merging; there too the
    Maintainer's authority counts only for the head that Maintainer applied at (here: a request
    approved before heads were recorded, its binding gone): never merged, approvals none."""
    policy(bot, "paths: {allowed: [config/]}\n")
    iid = person_mr(bot, files={".gitops/bot.yml": "paths: {allowed: [config/, apps/]}\n"})
    say(bot, MAINTAINER, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    bot.pass_pipeline(op["id"])
    bot.settle()
    assert bot.state(op["id"]) is S.APPROVAL_SENT
    with bot.services.engine.begin() as conn:  # as a request approved before migration 0010
        conn.execute(
            update(OPERATIONS).where(OPERATIONS.c.id == op["id"]).values(maintainer_sha=None)
        )
    assert bot.approve(op["id"]) == 202
    bot.settle()
    row = operation(bot.services.engine, op["id"])
    assert bot.state(op["id"]) is S.HANDLE_FAILED
    assert row["error_detail"].startswith("changed after approval: .gitops/bot.yml is a protected")
    assert "a Maintainer must apply again" in row["error_detail"]
    assert bot.gitlab.mr(PROJECT, iid).approvals == []
    assert bot.gitlab.file(PROJECT, ".gitops/bot.yml") == "paths: {allowed: [config/]}\n"


def applied_policy_edit(bot: Bot) -> tuple[int, str]:
    """A Maintainer-applied MR editing .gitops/bot.yml (MR first), carried to VALIDATED; its
    iid and the policy main had before. The operator's `workflow.order` flag is MR first, so
    the revert opens its MR before approval."""
    set_flag(bot.services.engine, "workflow.order", "mr_first")
    before = "paths: {allowed: [config/]}\ndeploy: {timeout: 900}\n"
    policy(bot, before)
    edit = "paths: {allowed: [config/, apps/]}\ndeploy: {timeout: 900}\n"
    iid = person_mr(bot, files={".gitops/bot.yml": edit})
    say(bot, MAINTAINER, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    to_validated(bot, op["id"])
    assert bot.gitlab.file(PROJECT, ".gitops/bot.yml") == edit
    return iid, before


def test_a_maintainers_revert_of_the_policy_file_merges(bot: Bot) -> None:
    """`/gitops revert` by a Maintainer writes files fixed when the Maintainer asked: their
    authority covers them, and the revert of the policy edit merges."""
    iid, before = applied_policy_edit(bot)
    say(bot, MAINTAINER, "/gitops revert", iid)
    revert = reverts(bot)[-1]
    assert (revert["maintainer_request"], revert["files"]) == (
        True,
        [{"path": ".gitops/bot.yml", "content": before}],
    )
    to_merged(bot, revert["id"])
    assert bot.gitlab.file(PROJECT, ".gitops/bot.yml") == before


def test_a_push_onto_a_maintainers_revert_never_merges(bot: Bot) -> None:
    """The Developer pushes a loosened policy onto the branch of a Maintainer's revert before
    its pipeline passes: the Maintainer's authority covers the revert's own files only, the MR
    no longer holds exactly them, so it never merges and main keeps the policy."""
    iid, _ = applied_policy_edit(bot)
    say(bot, MAINTAINER, "/gitops revert", iid)
    revert = reverts(bot)[-1]
    bot.settle()
    revert_mr = bot.gitlab.mr(PROJECT, operation(bot.services.engine, revert["id"])["mr_iid"])
    on_main = bot.gitlab.file(PROJECT, ".gitops/bot.yml")
    bot.gitlab.push(PROJECT, revert_mr.source_branch, {".gitops/bot.yml": LOOSENED}, author=AUTHOR)
    bot.settle()
    bot.pass_pipeline(revert["id"])
    bot.settle()
    if any(s["operation_id"] == revert["id"] for s in bot.approvals.submitted):
        bot.approve(revert["id"])
        bot.settle()
    assert bot.state(revert["id"]) in (S.CREATE_FAILED, S.HANDLE_FAILED)
    assert bot.gitlab.file(PROJECT, ".gitops/bot.yml") == on_main
    assert revert_mr.approvals == []


def reverts(bot: Bot) -> list[dict[str, Any]]:
    """The revert operations, oldest first."""
    query = select(OPERATIONS).where(OPERATIONS.c.kind == "revert")
    with bot.services.engine.connect() as conn:
        rows = conn.execute(query.order_by(OPERATIONS.c.created_at)).all()
    return [dict(r._mapping) for r in rows]


def to_merged(bot: Bot, op_id: str) -> None:
    """Carries an MR-first request whose MR the bot opens through its checks and approval."""
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.approve(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.MERGED


# -- a policy file tightens the operator's environment, never loosens it ---------------------------


def test_the_files_command_levels_never_go_below_the_environments(bot: Bot) -> None:
    """`apply: guest` in the file let a Guest apply (the default is Developer); now a file
    lowering a level is refused naming the key: the Guest and Reporter are refused by the
    environment's levels, and the Developer author too, with the file's line and column."""
    policy(bot, "commands:\n  min_access: {apply: guest, status: guest}\n")
    iid = person_mr(bot)
    for user in ("gus", "rita"):  # a Guest and a Reporter
        note = say(bot, user, "/gitops apply", iid)
        assert awards(bot, iid, note.id) == ["no_entry_sign"], user
    assert operations_of(bot, iid) == []
    assert "apply needs Developer or higher; you have Guest" in replies(bot, iid)[0]
    refused = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, refused.id) == ["no_entry_sign"]
    assert operations_of(bot, iid) == []
    reply = replies(bot, iid)[-1]
    assert "bot.yml:2:23: commands.min\\_access.apply: guest is below the server's level" in reply


def test_the_files_command_levels_stay_above_the_flags(bot: Bot) -> None:
    """The operator raised `apply` to Maintainer with the flag; the file's `apply: developer`
    does not bring it down."""
    set_flag(bot.services.engine, "commands.min_access", {"apply": 40})
    set_flag(bot.services.engine, "commands.author_may", [])
    policy(bot, "commands:\n  min_access: {apply: developer}\n")
    iid = person_mr(bot)
    note = say(bot, "dave", "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    assert operations_of(bot, iid) == []


@pytest.mark.parametrize(
    ("protected", "path", "why"),
    [
        ("secrets/", "secrets/db.yaml", "is outside the allowed paths (config/)"),
        (".gitlab-ci.yml", ".gitlab-ci.yml", "is a protected path (.gitlab-ci.yml); list it"),
    ],
)
def test_a_path_the_file_protects_is_not_opened_to_a_maintainer(
    db: Engine, protected: str, path: str, why: str
) -> None:
    """`paths.protected` only adds the need for a Maintainer: a Maintainer's MR touching a path
    it lists is still held to GITOPS_ALLOWED_PATHS and the built-in protected paths (it was let
    through "whatever the allowed paths say")."""
    with running_bot(db, allowed_paths=("config/",)) as bot:
        policy(bot, f"paths:\n  protected: [{protected}]\n")
        iid = person_mr(bot, files={path: "x: 1\n"})
        note = say(bot, MAINTAINER, "/gitops apply", iid)
        assert awards(bot, iid, note.id) == ["no_entry_sign"]
        [reply] = replies(bot, iid)
        assert f"`{path}`: {why}" in reply
        assert operations_of(bot, iid) == []


def test_apply_on_an_mr_into_an_unprotected_branch_is_refused(bot: Bot) -> None:
    """The issue's attack by comment: a branch holding a policy and a CI file of a Developer's,
    an MR into it, and `/gitops apply`: refused (the target is not a protected branch), nothing
    started, the policy on that branch never read as the change's."""
    bot.gitlab.push(
        PROJECT,
        "attack",
        {
            ".gitops/bot.yml": "approvals: {approvers: []}\n",
            ".gitlab-ci.yml": "x:\n  script: [id]\n",
        },
    )
    iid = bot.gitlab.open_mr(
        PROJECT,
        "feature",
        author=AUTHOR,
        target_branch="attack",
        files={"config/prod.yaml": "a: 1\n"},
    ).iid
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    assert operations_of(bot, iid) == []
    [reply] = replies(bot, iid)
    assert "not a protected branch" in reply
