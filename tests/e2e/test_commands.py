"""`/gitops apply` typed on a person's MR, carried to VALIDATED by the Procfile's processes."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from bot.core.states import BindingState as S
from bot.store.models import OPERATIONS
from tests.commands import PEOPLE
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import APPROVERS, AUTHOR, PROJECT, SETTLE, World

pytestmark = pytest.mark.e2e


def test_gitops_apply_on_a_persons_mr_reaches_validated(world: World) -> None:
    """Alice opens an MR and comments `/gitops apply`: checks, approval carrying ext.mrId,
    approvals and merge of her MR, then VALIDATED, all shown on her MR."""
    mr = world.gitlab.open_mr(
        PROJECT,
        "alice/scale-api",
        author="alice",
        files={"config/api.yaml": "replicas: 4\n"},
        title="Scale the API",
    )
    note = world.gitlab.add_note(PROJECT, mr.iid, "alice", "/gitops apply")
    subject = f"{PROJECT}!{mr.iid}"

    def operation() -> str | None:
        query = select(OPERATIONS.c.id).where(OPERATIONS.c.subject_id == subject)
        with world.engine.connect() as conn:
            found: str | None = conn.execute(query).scalar_one_or_none()
        return found

    op_id = wait_until(operation, 30, f"an operation for {subject}")
    assert isinstance(op_id, str)
    world.wait_state(op_id, S.VALIDATED)
    world.wait_ui(op_id)
    status = world.status(op_id)
    assert (status["phase"], status["flow"]) == ("VALIDATED", "mr_first")
    approval = world.approvals.approval_of(op_id)
    assert approval is not None
    ext = approval.submission["ext"]
    assert (ext["mrId"], ext["project"], set(ext)) == (
        mr.iid,
        PROJECT,
        {"mrId", "project", "change"},
    )
    assert ext["change"]["files"] == [{"path": "config/api.yaml", "action": "create"}]
    assert world.gitlab.mr(PROJECT, mr.iid).state == "merged"
    assert world.gitlab.file(PROJECT, "config/api.yaml") == "replicas: 4\n"
    reactions = world.gitlab.mr(PROJECT, mr.iid).notes[note.id].awards
    assert [(a.name, world.gitlab.state.users[a.user_id].username) for a in reactions] == [
        ("eyes", AUTHOR)
    ]
    effects = world.effects(op_id)
    assert effects == {
        "mrs": 1,
        "merges": 1,
        "approvals": dict.fromkeys(APPROVERS, 1),
        "comments": 1,
        "approval_requests": 1,
    }


def test_who_may_act_is_read_from_gitlab(world: World) -> None:
    """On the real processes: a forged hook naming a Maintainer on a Guest's `/gitops apply`
    gains nothing, a Guest author cannot apply their own MR, a hook naming a comment GitLab does
    not hold gets no reaction, and 20 refused commands by a non-member give 20 reactions and one
    reply."""
    world.add_people(PEOPLE)
    mine = world.gitlab.open_mr(
        PROJECT, "alice/forged", author="alice", files={"config/a.yaml": "a: 1\n"}, title="A"
    )
    forged = world.comment(mine.iid, "gus", "/gitops apply")
    assert world.forged_note_hook(
        mine.iid, forged.id, lambda p: p.update(user=world.user_hash("maria"))
    ) in (200, 202)
    unknown: dict[str, int] = {}

    def name_maria(payload: dict[str, Any]) -> None:
        payload["user"] = world.user_hash("maria")
        unknown["id"] = payload["object_attributes"]["id"]

    assert world.forged_note_hook(mine.iid, None, name_maria, note="/gitops apply") == 202
    guests = world.gitlab.open_mr(
        PROJECT, "gus/own", author="gus", files={"config/b.yaml": "b: 1\n"}, title="B"
    )
    own = world.comment(guests.iid, "gus", "/gitops apply")
    spam = world.gitlab.open_mr(
        PROJECT, "alice/spam", author="alice", files={"config/c.yaml": "c: 1\n"}, title="C"
    )
    notes = [world.comment(spam.iid, "nora", "/gitops apply") for _ in range(20)]

    def reacted() -> bool:
        looked = [(mine.iid, forged.id), (guests.iid, own.id)] + [(spam.iid, n.id) for n in notes]
        return all(world.awards_on(iid, note_id) for iid, note_id in looked)

    wait_until(reacted, SETTLE, "a reaction on every command")
    wait_until(lambda: world.note_audit(unknown["id"], ":ignored"), SETTLE, "the unknown note")
    world.wait_inbox_done()
    assert world.mr_operations(mine.iid) == []
    assert world.awards_on(mine.iid, forged.id) == [("no_entry_sign", AUTHOR)]
    [reply] = world.replies_to(mine.iid, forged.id)
    assert "you have Guest" in reply
    assert [r["actor"] for r in world.note_audit(forged.id)] == ["gus"]
    [ignored] = world.note_audit(unknown["id"], ":ignored")
    assert ignored["detail"] == "ignored: GitLab does not know this comment"
    assert world.mr_operations(guests.iid) == []
    assert world.awards_on(guests.iid, own.id) == [("no_entry_sign", AUTHOR)]
    assert world.mr_operations(spam.iid) == []
    assert [world.awards_on(spam.iid, n.id) for n in notes] == [[("no_entry_sign", AUTHOR)]] * 20
    spam_replies = sum(len(world.replies_to(spam.iid, n.id)) for n in notes)
    record("forged author: requests it made", len(world.mr_operations(mine.iid)), "requests")
    record("20 refused commands by one non-member: replies", spam_replies, "replies")
    assert spam_replies == 1
