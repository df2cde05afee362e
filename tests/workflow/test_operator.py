"""bot/app/operator.py: the one retry and cancel behind the API, the CLI and MR commands.

Each door has its own tests (tests/api/test_changes.py, tests/cli/test_ops.py,
tests/commands/test_verbs.py); these pin what they now share: the budget a retry restarts, in
both transaction shapes, and the kinds of refusal each door words for its audience.
"""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.app import operator
from bot.app.operator import OperatorRefused, Refusal
from bot.config import Settings
from bot.core.events import Event as E
from bot.core.events import Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.services import Services
from bot.store.fire import fire
from bot.store.operations import touch
from bot.store.submit import submit
from tests.api import FakeQueue
from tests.builders import make_operation, make_request, operation


def _failed(db: Engine) -> str:
    """A change that failed while merging after the sweep had re-driven it five times."""
    op_id = make_operation(db, S.MERGING)
    fire(
        db,
        TransitionRequest(op_id, E.MERGE_ERROR, changes={"error_detail": "405 Method Not Allowed"}),
    )
    touch(db, op_id, attempts=5)
    return op_id


def _services(db: Engine) -> tuple[Services, FakeQueue]:
    queue = FakeQueue()
    return Services(settings=Settings(), engine=db, queue=queue), queue


def test_a_retry_in_its_own_transaction_restarts_the_budget_and_drives(db: Engine) -> None:
    """The API's and the CLI's shape: moved, the sweep's budget whole again, the drive queued."""
    op_id = _failed(db)
    services, queue = _services(db)
    moved = operator.move(services, op_id, E.RETRY, actor="api:ops")
    assert (moved.transition.old_state, moved.transition.new_state) == (S.HANDLE_FAILED, S.MERGING)
    assert operation(db, op_id)["attempts"] == 0
    assert moved.follow_up == "drive job queued"
    assert [job[1] for job in queue.enqueued] == [(op_id,)]


def test_a_retry_in_the_callers_transaction_restarts_the_budget(db: Engine) -> None:
    """The MR command's shape (inside the note's one transaction): the same budget restarted."""
    op_id = _failed(db)
    with db.begin() as conn:
        operator.move_in(conn, op_id, E.RETRY, source=Source.COMMAND, actor="maria")
    row = operation(db, op_id)
    assert (row["attempts"], row["version"] > 0) == (0, True)


def test_without_a_queue_that_reaches_the_bot_the_sweep_drives_a_retry(db: Engine) -> None:
    """The CLI on the embedded default: nothing queued here, the deadline is now."""
    op_id = _failed(db)
    services, queue = _services(db)
    moved = operator.move(services, op_id, E.RETRY, actor="cli:olivia", queue_reaches_bot=False)
    assert "next sweep drives it" in moved.follow_up
    assert queue.enqueued == []
    assert operation(db, op_id)["deadline_at"] is not None


@pytest.mark.parametrize(
    ("setup", "event", "kind"),
    [
        ("unknown", E.RETRY, Refusal.NOT_FOUND),
        ("validated", E.CANCEL, Refusal.ILLEGAL),
        ("replaced", E.RETRY, Refusal.STALE),
    ],
)
def test_each_refusal_has_its_kind_and_changes_nothing(
    db: Engine, setup: str, event: E, kind: Refusal
) -> None:
    """No such change, not possible where it stands, replaced by a newer request: each a kind
    the doors word (404 / 409 codes, a CLI line, an MR reply), and the change is unmoved."""
    if setup == "unknown":
        op_id = "00000000-0000-4000-8000-000000000000"
    elif setup == "validated":
        op_id = make_operation(db, S.VALIDATED)
    else:
        op_id = make_operation(db, S.CLOSED, subject_id="svc", target_key="cfg")
        submit(db, make_request(subject_id="svc", target_key="cfg"))  # a re-apply replaces it
    before = None if setup == "unknown" else operation(db, op_id)["version"]
    services, queue = _services(db)
    with pytest.raises(OperatorRefused) as refused:
        operator.move(services, op_id, event, actor="api:ops")
    assert refused.value.kind is kind
    if kind is Refusal.ILLEGAL:
        assert "it is VALIDATED" in refused.value.message
        assert "cancel is allowed in" in refused.value.message
    if before is not None:
        assert operation(db, op_id)["version"] == before
    assert queue.enqueued == []
