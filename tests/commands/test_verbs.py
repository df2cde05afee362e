"""What each verb does, end to end: apply to VALIDATED, cancel, retry, status, revert, help."""

from __future__ import annotations

from sqlalchemy import func, select

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.gitlab import status_marker
from bot.store.flags import set_flag
from bot.store.models import AUDIT, OUTBOX
from tests.builders import operation
from tests.commands import (
    AUTHOR,
    audit_rows,
    awards,
    bot_notes,
    carry,
    flush_outbox,
    mr_iid_of,
    operations_of,
    person_mr,
    replies,
    say,
    to_validated,
)
from tests.workflow.harness import PROJECT, Bot


def assert_versions_match_audit(bot: Bot, op_id: str) -> None:
    """Command audit rows never break `count(audit rows with version > 0) == version`."""
    with bot.services.engine.connect() as conn:
        moved = conn.execute(
            select(func.count())
            .select_from(AUDIT)
            .where(AUDIT.c.operation_id == op_id, AUDIT.c.version > 0)
        ).scalar_one()
    assert moved == operation(bot.services.engine, op_id)["version"]


def the_revert_of(bot: Bot, op_id: str) -> str:
    """The id of the revert request of an operation."""
    reverts = [
        row
        for row in audit_rows(bot)
        if row["event"] == "revert"
        and operation(bot.services.engine, row["operation_id"])["reverts_operation_id"] == op_id
    ]
    assert len(reverts) == 1
    return str(reverts[0]["operation_id"])


def merge_revert(bot: Bot, revert_id: str) -> None:
    """Carries a revert request (approve-first, the default order) to MERGED."""
    bot.settle()
    assert bot.state(revert_id) is S.APPROVAL_SENT
    assert bot.approve(revert_id) == 202
    bot.settle()
    bot.pass_pipeline(revert_id)
    bot.settle()
    assert bot.state(revert_id) is S.MERGED


# -- apply -----------------------------------------------------------------------------------------


def test_apply_carries_a_persons_mr_to_validated(bot: Bot) -> None:
    """`/gitops apply` by the author registers the MR (MR-first) and it goes all the way."""
    iid = person_mr(bot, title="Scale service-a to 3")
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    [op] = operations_of(bot, iid)
    assert (op["subject_id"], op["target_key"]) == (f"{PROJECT}!{iid}", f"{PROJECT}:main")
    assert (op["flow"], op["files"], op["requested_by"]) == (Flow.MR_FIRST, [], AUTHOR)
    assert (op["title"], op["mr_opened_by_bot"]) == ("Scale service-a to 3", False)
    assert bot.state(op["id"]) is S.MR_CREATING
    bot.pass_pipeline(op["id"])
    bot.settle()
    assert bot.state(op["id"]) is S.APPROVAL_SENT
    ext = bot.approvals.submitted[0]["ext"]
    assert (ext["mrId"], ext["project"], set(ext)) == (iid, PROJECT, {"mrId", "project", "change"})
    change = ext["change"]  # what the approval approves: the MR's content at its head
    assert (change["project"], change["target_branch"]) == (PROJECT, "main")
    assert change["files"] == [{"path": "config/prod.yaml", "action": "update"}]
    assert change["head_sha"] == bot.gitlab.mr(PROJECT, iid).sha
    assert bot.approve(op["id"]) == 202
    bot.settle()
    assert bot.state(op["id"]) is S.MERGED
    assert bot.gitlab.mr(PROJECT, iid).state == "merged"
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 3\n"
    bot.deployed(op["id"])
    bot.settle()
    assert bot.state(op["id"]) is S.VALIDATED
    [row] = audit_rows(bot, f"note:{note.id}")
    assert (row["event"], row["source"], row["actor"]) == ("submit", "command", AUTHOR)
    flush_outbox(bot)
    [comment] = [b for b in bot_notes(bot, iid) if status_marker(op["id"]) in b]
    assert "| command | alice |" in comment
    assert replies(bot, iid) == []


def test_apply_while_in_progress_is_refused_with_the_operation(bot: Bot) -> None:
    """A second `/gitops apply` while the first request runs is refused, naming it."""
    iid = person_mr(bot)
    say(bot, AUTHOR, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    note = say(bot, "maria", "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert f"already in progress (operation {op['id']})" in reply
    assert len(operations_of(bot, iid)) == 1


def test_apply_after_cancel_starts_again_in_place(bot: Bot) -> None:
    """After `/gitops cancel` the same MR can be applied again: a new request, same binding."""
    iid = person_mr(bot)
    say(bot, AUTHOR, "/gitops apply", iid)
    [first] = operations_of(bot, iid)
    say(bot, AUTHOR, "/gitops cancel", iid)
    assert bot.state(first["id"]) is S.CLOSED
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    first_again, second = operations_of(bot, iid)
    assert first_again["id"] == first["id"]
    assert second["binding_id"] == first["binding_id"]
    assert bot.state(second["id"]) is S.MR_CREATING


def test_apply_on_a_merged_mr_is_refused(bot: Bot) -> None:
    """An MR that is no longer open cannot become a request."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    to_validated(bot, op_id)
    say(bot, AUTHOR, "/gitops apply", iid)
    [reply] = replies(bot, iid)
    assert "the merge request is merged, not open" in reply
    assert len(operations_of(bot, iid)) == 1


def test_apply_on_the_bots_own_mr_is_refused(bot: Bot) -> None:
    """An MR the bot opened for an API request cannot be applied again as a person's MR."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    iid = mr_iid_of(bot, op_id)
    say(bot, "maria", "/gitops apply", iid)
    [reply] = replies(bot, iid)
    assert f"opened by the bot for operation {op_id}" in reply
    assert len(operations_of(bot, iid)) == 1


# -- cancel and retry ----------------------------------------------------------------------------


def test_cancel_closes_the_bots_mr_and_withdraws_the_approval(bot: Bot) -> None:
    """`/gitops cancel` on the bot's MR: state CLOSED, approval withdrawn, MR closed."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    iid = mr_iid_of(bot, op_id)
    note = say(bot, "maria", "/gitops cancel", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    assert bot.state(op_id) is S.CLOSED
    flush_outbox(bot)
    assert bot.gitlab.mr(PROJECT, iid).state == "closed"
    assert bot.approvals.withdrawn == [operation(bot.services.engine, op_id)["approval_id"]]
    assert "gitops::closed" in bot.gitlab.mr(PROJECT, iid).labels
    assert_versions_match_audit(bot, op_id)


def test_cancel_leaves_a_persons_mr_open(bot: Bot) -> None:
    """Cancelling an applied MR closes the request and withdraws the approval, not the MR."""
    iid = person_mr(bot)
    say(bot, AUTHOR, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    bot.pass_pipeline(op["id"])
    bot.settle()
    say(bot, AUTHOR, "/gitops cancel", iid)
    assert bot.state(op["id"]) is S.CLOSED
    flush_outbox(bot)
    assert bot.gitlab.mr(PROJECT, iid).state == "opened"
    assert bot.approvals.withdrawn == [operation(bot.services.engine, op["id"])["approval_id"]]


def test_retry_redrives_a_failed_request(bot: Bot) -> None:
    """A request stopped by a failed pipeline goes on after `/gitops retry` once it passes."""
    iid = person_mr(bot)
    say(bot, AUTHOR, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    bot.pass_pipeline(op["id"], status="failed")
    bot.settle()
    assert bot.state(op["id"]) is S.CREATE_FAILED
    pipeline = bot.gitlab.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    bot.gitlab.set_pipeline(PROJECT, pipeline.id, "success")  # re-run by a person, no webhook
    note = say(bot, AUTHOR, "/gitops retry", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    assert bot.state(op["id"]) is S.MR_CREATING
    bot.settle(advance=15)  # the re-driven step polls the pipeline
    assert bot.state(op["id"]) is S.APPROVAL_SENT
    [row] = audit_rows(bot, f"note:{note.id}")
    assert (row["event"], row["from_state"], row["to_state"]) == (
        "retry",
        "CREATE_FAILED",
        "MR_CREATING",
    )
    assert (row["source"], row["actor"]) == ("command", AUTHOR)
    assert_versions_match_audit(bot, op["id"])


def test_retry_with_nothing_to_retry_is_refused(bot: Bot) -> None:
    """`/gitops retry` on a validated change changes nothing and says why."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    to_validated(bot, op_id)
    version = operation(bot.services.engine, op_id)["version"]
    note = say(bot, "maria", "/gitops retry", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "retry is not possible while the request is validated" in reply
    assert operation(bot.services.engine, op_id)["version"] == version
    assert_versions_match_audit(bot, op_id)


def test_a_flag_lets_developers_retry(bot: Bot) -> None:
    """`commands.min_access` read per command: Developer may retry once it says so."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    bot.pass_pipeline(op_id, status="failed")
    bot.settle()
    say(bot, "dave", "/gitops retry", iid)
    assert bot.state(op_id) is S.CREATE_FAILED
    set_flag(bot.services.engine, "commands.min_access", {"retry": 30})
    note = say(bot, "dave", "/gitops retry", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    assert bot.state(op_id) is S.MR_CREATING


def test_an_author_who_left_the_project_is_not_the_author_any_more(bot: Bot) -> None:
    """The MR author's rights last while they are a member; afterwards retry is refused."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    bot.pass_pipeline(op_id, status="failed")
    bot.settle()
    bot.gitlab.add_member(PROJECT, AUTHOR, 0)
    say(bot, AUTHOR, "/gitops retry", iid)
    assert bot.state(op_id) is S.CREATE_FAILED
    [reply] = replies(bot, iid)
    assert "you have no access" in reply


# -- status and help -------------------------------------------------------------------------------


def test_status_rewrites_the_one_status_comment(bot: Bot) -> None:
    """`/gitops status` queues a re-render; the dispatcher edits the one comment in place."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    flush_outbox(bot)
    [before] = [b for b in bot_notes(bot, iid) if status_marker(op_id) in b]
    note = say(bot, "dave", "/gitops status", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    with bot.services.engine.connect() as conn:
        pending = (
            conn.execute(
                select(OUTBOX.c.effect).where(
                    OUTBOX.c.operation_id == op_id, OUTBOX.c.sent_at.is_(None)
                )
            )
            .scalars()
            .all()
        )
    assert pending == ["status_comment"]
    flush_outbox(bot)
    [after] = [b for b in bot_notes(bot, iid) if status_marker(op_id) in b]
    assert after != before  # the command is on the timeline now
    assert "`cmd:status`" in after
    assert replies(bot, iid) == []
    assert_versions_match_audit(bot, op_id)


def test_status_restores_a_deleted_status_comment(bot: Bot) -> None:
    """A person deleted the status comment; `/gitops status` writes it again, with the command
    on its timeline as a command (not as an ignored event)."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    flush_outbox(bot)
    notes = bot.gitlab.mr(PROJECT, iid).notes
    [mine] = [n.id for n in notes.values() if status_marker(op_id) in n.body]
    del notes[mine]
    say(bot, "dave", "/gitops status", iid)
    flush_outbox(bot)
    [again] = [b for b in bot_notes(bot, iid) if status_marker(op_id) in b]
    assert "command accepted" in again
    assert "ignored (stale event)" not in again


def test_status_without_a_request_says_how_to_start_one(bot: Bot) -> None:
    """On an MR no request carries, `/gitops status` is refused with a pointer to apply."""
    iid = person_mr(bot)
    note = say(bot, "dave", "/gitops status", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "there is no GitOps request on this merge request" in reply
    [row] = audit_rows(bot, f"note:{note.id}")
    assert row["operation_id"] == f"mr:{bot.gitlab.project(PROJECT).id}!{iid}"


def test_help_by_mention_for_anyone(bot: Bot) -> None:
    """`@gitops-bot help` from a non-member is answered with the commands and who may run them."""
    iid = person_mr(bot)
    note = say(bot, "nora", "@gitops-bot help", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    [reply] = replies(bot, iid)
    assert (
        "| `/gitops revert` | undo a merged change with a new change request | Maintainer" in reply
    )
    assert "`@gitops-bot <command>` works too." in reply
    assert not any(line.startswith(("/gitops", "@gitops-bot")) for line in reply.splitlines())


def test_an_unknown_verb_is_answered_with_the_help_naming_it(bot: Bot) -> None:
    """`/gitops deploy` runs nothing and the reply names the unknown word, escaped."""
    iid = person_mr(bot)
    note = say(bot, "maria", "/gitops dep*loy", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "Your command was not run: unknown command 'dep\\*loy'" in reply
    assert "**GitOps commands.**" in reply
    assert operations_of(bot, iid) == []


# -- revert ----------------------------------------------------------------------------------------


def test_revert_of_a_validated_change_undoes_its_files(bot: Bot) -> None:
    """`/gitops revert` on a validated API change makes a request whose files put main back."""
    files = [
        {"path": "config/prod.yaml", "content": "replicas: 3\n"},
        {"path": "config/new.yaml", "content": "feature: on\n"},
    ]
    op_id = bot.request(Flow.APPROVE_FIRST, files=files)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.deployed(op_id)
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED
    assert bot.gitlab.file(PROJECT, "config/new.yaml") == "feature: on\n"
    iid = mr_iid_of(bot, op_id)
    note = say(bot, "maria", "/gitops revert", iid)
    assert awards(bot, iid, note.id) == ["eyes"]
    revert_id = the_revert_of(bot, op_id)
    revert = operation(bot.services.engine, revert_id)
    assert revert["files"] == [
        {"path": "config/prod.yaml", "content": "replicas: 1\n"},
        {"path": "config/new.yaml", "action": "delete"},
    ]
    assert (revert["kind"], revert["requested_by"]) == ("revert", "maria")
    merge_revert(bot, revert_id)
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 1\n"
    assert bot.gitlab.file(PROJECT, "config/new.yaml") is None


def test_revert_of_an_applied_mr_restores_main(bot: Bot) -> None:
    """A `/gitops apply` change (no files of its own) is undone from its MR's diff."""
    iid = person_mr(
        bot, files={"config/prod.yaml": "replicas: 5\n", "config/extra.yaml": "extra: true\n"}
    )
    say(bot, AUTHOR, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    to_validated(bot, op["id"])
    say(bot, "maria", "/gitops revert", iid)
    revert_id = the_revert_of(bot, op["id"])
    merge_revert(bot, revert_id)
    assert bot.gitlab.file(PROJECT, "config/prod.yaml") == "replicas: 1\n"
    assert bot.gitlab.file(PROJECT, "config/extra.yaml") is None


def test_revert_refuses_when_a_file_changed_again_after_the_merge(bot: Bot) -> None:
    """Restoring a file someone changed since the merge would undo their work too: refused."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    to_validated(bot, op_id)
    bot.gitlab.push(PROJECT, "main", {"config/prod.yaml": "replicas: 7\n"})
    note = say(bot, "maria", "/gitops revert", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "cannot revert: config/prod.yaml changed again after the merge" in reply
    assert bot.state(op_id) is S.VALIDATED


def test_revert_of_an_unmerged_request_is_refused(bot: Bot) -> None:
    """Only a merged or validated change can be reverted."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    say(bot, "maria", "/gitops revert", iid)
    [reply] = replies(bot, iid)
    assert "only a merged change can be reverted; the request is mr creating" in reply
    assert bot.state(op_id) is S.MR_CREATING
