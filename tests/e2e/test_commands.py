"""`/gitops apply` typed on a person's MR, carried to VALIDATED by the Procfile's processes."""

from __future__ import annotations

import importlib.util
import inspect

import pytest
from sqlalchemy import select

from bot.core.states import BindingState as S
from bot.store.models import OPERATIONS
from tests.e2e.cluster import wait_until
from tests.e2e.world import APPROVERS, AUTHOR, PROJECT, World


def _commands_wired() -> bool:
    if importlib.util.find_spec("jobs.commands") is None:
        return False
    import jobs.inbox

    return "on_note" in inspect.getsource(jobs.inbox)


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not _commands_wired(), reason="commands not wired yet"),
]


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
    assert world.approvals.approval_of(op_id).submission["ext"] == {  # type: ignore[union-attr]
        "mrId": mr.iid,
        "project": PROJECT,
    }
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
