"""Notes that never run a command, lookups that fail closed, and notes delivered twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.states import BindingState as S
from tests.commands import (
    AUTHOR,
    audit_rows,
    awards,
    carry,
    deliver,
    operations_of,
    person_mr,
    replies,
    say,
)
from tests.workflow.harness import PROJECT, SECRETS, Bot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def assert_untouched(bot: Bot, iid: int, note_id: int) -> None:
    """No request, no reaction, no reply: the note changed nothing."""
    assert operations_of(bot, iid) == []
    assert awards(bot, iid, note_id) == []
    assert replies(bot, iid) == []


def test_an_edit_never_runs_a_command(bot: Bot) -> None:
    """A comment edited into `/gitops apply` (Note Hook with action update) runs nothing."""
    iid = person_mr(bot)
    note = say(bot, "maria", "looks fine", iid)
    bot.gitlab.edit_note(PROJECT, iid, note.id, "/gitops apply")
    assert deliver(bot, iid, note.id, action="update") == 202
    bot.settle()
    assert_untouched(bot, iid, note.id)
    [row] = audit_rows(bot, f"note:{note.id}:ignored")
    assert row["detail"] == "ignored: an edited comment (action update)"
    assert (row["actor"], row["version"], row["event"]) == ("maria", 0, "cmd:apply")


def test_editing_a_command_does_not_run_it_again(bot: Bot) -> None:
    """An applied command edited into `/gitops cancel` neither re-applies nor cancels."""
    iid = person_mr(bot)
    note = say(bot, AUTHOR, "/gitops apply", iid)
    [op] = operations_of(bot, iid)
    bot.gitlab.edit_note(PROJECT, iid, note.id, "/gitops cancel")
    deliver(bot, iid, note.id, action="update")
    bot.settle()
    assert bot.state(op["id"]) is S.MR_CREATING
    assert len(operations_of(bot, iid)) == 1
    assert awards(bot, iid, note.id) == ["eyes"]


def test_a_system_note_never_runs_a_command(bot: Bot) -> None:
    """A system note that happens to read `/gitops apply` runs nothing."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "maria", "/gitops apply", system=True)
    deliver(bot, iid, note.id)
    bot.settle()
    assert_untouched(bot, iid, note.id)
    [row] = audit_rows(bot, f"note:{note.id}:ignored")
    assert row["detail"] == "ignored: a system note"


def test_the_bots_own_note_never_runs_a_command(bot: Bot) -> None:
    """A note by the bot's account (matched by username) runs nothing, even by mention."""
    iid = person_mr(bot)
    note = say(bot, "gitops-bot", "@gitops-bot apply", iid)
    assert_untouched(bot, iid, note.id)
    [row] = audit_rows(bot, f"note:{note.id}:ignored")
    assert row["detail"] == "ignored: the bot's own comment"


def test_a_note_on_an_mr_from_a_fork_never_runs_a_command(bot: Bot) -> None:
    """A maintainer's `/gitops apply` on an MR whose source is a fork runs nothing."""
    bot.gitlab.add_project("alice/config", files={"config/prod.yaml": "replicas: 1\n"})
    mr = bot.gitlab.open_mr(
        PROJECT,
        "feature",
        author=AUTHOR,
        source_project="alice/config",
        files={"config/prod.yaml": "replicas: 9\n"},
    )
    note = say(bot, "maria", "/gitops apply", mr.iid)
    assert_untouched(bot, mr.iid, note.id)
    [row] = audit_rows(bot, f"note:{note.id}:ignored")
    assert row["detail"] == "ignored: a merge request from a fork"


def test_a_note_not_on_an_mr_never_runs_a_command(bot: Bot) -> None:
    """A command typed on a commit is acknowledged, audited under the project, and ignored."""
    payload = json.loads((FIXTURES / "note_commit.json").read_text())
    payload["object_attributes"]["note"] = "/gitops apply"
    headers = {
        "X-Gitlab-Event": "Note Hook",
        "X-Gitlab-Token": SECRETS["webhook"],
        "Content-Type": "application/json",
    }
    body = json.dumps(payload).encode()
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code == 202
    bot.settle()
    [row] = audit_rows(bot, f"note:{payload['object_attributes']['id']}:ignored")
    assert row["operation_id"] == f"project:{payload['project']['id']}"
    assert row["detail"] == "ignored: not on a merge request"


@pytest.mark.parametrize(
    "body",
    [
        "> /gitops apply",
        "```\n/gitops apply\n```",
        "see `/gitops apply`",
        "\u200b/gitops apply",
        "/gitops apply\u00a0",
    ],
)
def test_quoted_coded_or_odd_commands_do_nothing_at_all(bot: Bot, body: str) -> None:
    """Text that only looks like a command gets no reaction, no audit row and no request."""
    iid = person_mr(bot)
    note = say(bot, "maria", body, iid)
    assert_untouched(bot, iid, note.id)
    assert [r for r in audit_rows(bot) if str(r["correlation_id"]).startswith("note:")] == []


@pytest.mark.parametrize("status", [500, 403, "timeout"])
@pytest.mark.parametrize("user", ["dave", AUTHOR])
def test_a_failed_member_lookup_denies(bot: Bot, status: int | str, user: str) -> None:
    """When GitLab cannot say who the commenter is, even the author's apply is refused (a 5xx
    read is sent once more at once, so it fails twice here)."""
    iid = person_mr(bot)
    tries = 2 if status == 500 else 1
    bot.gitlab.fail_next(tries, status, methods="GET", path_contains="/members/")
    note = say(bot, user, "/gitops apply", iid)
    assert operations_of(bot, iid) == []
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "could not be checked" in reply
    assert bot.gitlab.count("GET", "/members/all/") == tries


def test_the_same_note_delivered_twice_acts_once(bot: Bot) -> None:
    """Two deliveries of one `/gitops apply` note (new Idempotency-Keys) make one request."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, AUTHOR, "/gitops apply")
    assert deliver(bot, iid, note.id) == 202
    assert deliver(bot, iid, note.id) == 202
    bot.settle()
    [op] = operations_of(bot, iid)
    assert bot.state(op["id"]) is S.MR_CREATING
    [row] = audit_rows(bot, f"note:{note.id}")
    assert (row["event"], row["source"], row["actor"]) == ("submit", "command", AUTHOR)
    assert awards(bot, iid, note.id) == ["eyes"]


def test_a_retry_delivered_twice_retries_once(bot: Bot) -> None:
    """The same `/gitops retry` note processed twice fires RETRY once."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    bot.pass_pipeline(op_id, status="failed")
    bot.settle()
    note = bot.gitlab.add_note(PROJECT, iid, "maria", "/gitops retry")
    deliver(bot, iid, note.id)
    bot.settle()
    deliver(bot, iid, note.id)
    bot.settle()
    rows = [r for r in audit_rows(bot) if r["event"] == "retry"]
    assert len(rows) == 1
    assert rows[0]["correlation_id"] == f"note:{note.id}"


def test_a_refusal_delivered_twice_is_answered_once(bot: Bot) -> None:
    """A refused command processed twice is audited once and answered with one reply."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "rita", "/gitops apply")
    deliver(bot, iid, note.id)
    deliver(bot, iid, note.id)
    bot.settle()
    assert len(replies(bot, iid)) == 1
    assert len(audit_rows(bot, f"note:{note.id}")) == 1
    assert awards(bot, iid, note.id) == ["no_entry_sign"]


def test_a_lost_reaction_is_given_on_reprocessing_with_its_one_reply(bot: Bot) -> None:
    """If the reaction failed the first time, processing the note again reacts and replies
    (once); a third processing adds nothing."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "gus", "/gitops cancel")
    bot.gitlab.fail_next(1, 503, methods="POST", path_contains="/award_emoji")
    deliver(bot, iid, note.id)
    bot.settle()
    assert awards(bot, iid, note.id) == []
    assert replies(bot, iid) == []
    for _ in range(2):
        deliver(bot, iid, note.id)
        bot.settle()
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert (
        "cancel needs Maintainer or higher (Developer or higher for the MR author); "
        "you have Guest" in reply
    )
    assert len(audit_rows(bot, f"note:{note.id}")) == 1
