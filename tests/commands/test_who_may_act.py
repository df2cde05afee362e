"""Who may act is read from GitLab, never from the payload: forged authors, bodies and flags."""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.states import BindingState as S
from tests.commands import (
    AUTHOR,
    audit_rows,
    awards,
    carry,
    deliver_forged,
    flush_outbox,
    operations_of,
    person_mr,
    replies,
    say,
)
from tests.workflow.harness import PROJECT, Bot


def as_user(bot: Bot, username: str) -> dict[str, Any]:
    """The `user` object a Note Hook carries for `username`."""
    user = bot.gitlab.user(username)
    return {"id": user.id, "username": username, "name": username.title()}


def checking(bot: Bot) -> tuple[int, str]:
    """The author's MR carried by an MR-first request waiting for its checks."""
    iid = person_mr(bot)
    op_id = carry(bot, iid)
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    flush_outbox(bot)
    return iid, op_id


def test_a_forged_maintainer_author_gains_nothing(bot: Bot) -> None:
    """The payload says a Maintainer typed `/gitops cancel`; GitLab says a Guest did: refused
    as the Guest, the request still runs, and the audit row names the Guest."""
    iid, op_id = checking(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "gus", "/gitops cancel")

    def forge(payload: dict[str, Any]) -> None:
        payload["user"] = as_user(bot, "maria")
        payload["object_attributes"]["author_id"] = bot.gitlab.user("maria").id

    assert deliver_forged(bot, iid, note.id, forge) == 202
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "you have Guest" in reply
    [row] = audit_rows(bot, f"note:{note.id}")
    assert (row["actor"], row["detail"][:9]) == ("gus", "refused: ")
    gus = bot.gitlab.user("gus").id
    assert bot.gitlab.count("GET", f"/members/all/{gus}") == 1
    assert bot.gitlab.count("GET", f"/members/all/{bot.gitlab.user('maria').id}") == 0


def test_a_forged_mr_author_gains_nothing(bot: Bot) -> None:
    """A Developer's `/gitops cancel` whose payload names them the MR's author is refused: the
    MR's author is read from GitLab (alice), and only an author may cancel below Maintainer."""
    iid, op_id = checking(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "dave", "/gitops cancel")

    def forge(payload: dict[str, Any]) -> None:
        payload["merge_request"]["author_id"] = bot.gitlab.user("dave").id

    deliver_forged(bot, iid, note.id, forge)
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "cancel needs Maintainer or higher" in reply


def test_a_system_note_forged_as_a_comment_never_runs(bot: Bot) -> None:
    """A system note reading `/gitops apply`, delivered with `system: false` by a Maintainer's
    name, runs nothing: GitLab says it is a system note."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "maria", "/gitops apply", system=True)

    def forge(payload: dict[str, Any]) -> None:
        payload["object_attributes"]["system"] = False

    deliver_forged(bot, iid, note.id, forge)
    bot.settle()
    assert operations_of(bot, iid) == []
    assert awards(bot, iid, note.id) == []
    assert replies(bot, iid) == []
    [row] = audit_rows(bot, f"note:{note.id}:ignored")
    assert row["detail"] == "ignored: a system note"


def test_a_payload_body_that_is_not_gitlabs_does_not_run(bot: Bot) -> None:
    """The payload says `/gitops apply` where GitLab's comment says `looks good`: nothing runs,
    no reaction, and the audit says GitLab's comment holds no command."""
    iid = person_mr(bot)
    note = say(bot, AUTHOR, "looks good", iid, settle=False)

    def forge(payload: dict[str, Any]) -> None:
        payload["object_attributes"]["note"] = "/gitops apply"

    deliver_forged(bot, iid, note.id, forge)
    bot.settle()
    assert operations_of(bot, iid) == []
    assert awards(bot, iid, note.id) == []
    [row] = audit_rows(bot, f"note:{note.id}:ignored")
    assert row["detail"] == "ignored: the comment GitLab holds is not a command"


def test_gitlabs_body_is_the_command_that_runs(bot: Bot) -> None:
    """The payload says `/gitops help` (anyone may), GitLab's comment says `/gitops apply` by a
    Reporter: the apply is what is judged, and refused; help is not given."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, "rita", "/gitops apply")

    def forge(payload: dict[str, Any]) -> None:
        payload["object_attributes"]["note"] = "/gitops help"

    deliver_forged(bot, iid, note.id, forge)
    bot.settle()
    assert operations_of(bot, iid) == []
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "`/gitops apply` was not run: apply needs Developer or higher" in reply
    assert "GitOps commands." not in reply
    [row] = audit_rows(bot, f"note:{note.id}")
    assert row["event"] == "cmd:apply"


def test_a_note_gitlab_does_not_know_is_ignored(bot: Bot) -> None:
    """A Note Hook naming a comment GitLab does not hold (a Maintainer's `/gitops apply`) gets
    no reaction and no reply; it is audited as ignored."""
    iid = person_mr(bot)
    captured: dict[str, int] = {}

    def forge(payload: dict[str, Any]) -> None:
        payload["user"] = as_user(bot, "maria")
        captured["id"] = payload["object_attributes"]["id"]

    deliver_forged(bot, iid, None, forge, note="/gitops apply")
    bot.settle()
    assert operations_of(bot, iid) == []
    assert replies(bot, iid) == []
    assert all(not n.awards for n in bot.gitlab.mr(PROJECT, iid).notes.values())
    assert bot.gitlab.count("POST", "/award_emoji") == 0
    [row] = audit_rows(bot, f"note:{captured['id']}:ignored")
    assert row["detail"] == "ignored: GitLab does not know this comment"


def test_a_forged_project_path_does_not_move_another_project(bot: Bot) -> None:
    """A hook naming one project's id but another's path: the request is recorded under the
    project GitLab says the MR belongs to, never under the path the payload gave."""
    iid = person_mr(bot)
    note = bot.gitlab.add_note(PROJECT, iid, AUTHOR, "/gitops apply")

    def forge(payload: dict[str, Any]) -> None:
        payload["project"]["path_with_namespace"] = "victim/repo"

    deliver_forged(bot, iid, note.id, forge)
    bot.settle()
    [op] = operations_of(bot, iid)
    assert (op["project"], op["subject_id"]) == (PROJECT, f"{PROJECT}!{iid}")


@pytest.mark.parametrize("verb", ["apply", "status", "retry", "cancel"])
def test_a_guest_author_may_not_act_on_their_own_mr(bot: Bot, verb: str) -> None:
    """A Guest who wrote the MR gains nothing by being its author: each verb the author may run
    (from Developer up) is refused, and nothing changes."""
    iid = person_mr(bot, author="gus")
    op_id = carry(bot, iid) if verb != "apply" else None
    bot.settle()
    before = [(o["id"], o["version"]) for o in operations_of(bot, iid)]
    note = say(bot, "gus", f"/gitops {verb}", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert f"{verb} needs" in reply
    assert "you have Guest" in reply
    assert [(o["id"], o["version"]) for o in operations_of(bot, iid)] == before
    if op_id is not None:
        assert bot.state(op_id) is S.MR_CREATING
