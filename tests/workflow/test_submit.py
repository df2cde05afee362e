"""bot/app/submit.py called directly (no Flask): replay, a reused key, the overload bound.

The HTTP answers are pinned by tests/api/test_submit.py; these pin the use case behind them.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from bot.app.submit import Accepted, SubmitRefusal, SubmitRefused, submit_change
from bot.config import Settings
from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.services import Services
from bot.store.flags import set_flag
from bot.store.models import AUDIT, OPERATIONS
from bot.store.submit import NewRequest
from tests.api import FakeQueue
from tests.builders import binding_state, count, make_request, operation


def _services(db: Engine) -> tuple[Services, FakeQueue]:
    queue = FakeQueue()
    return Services(settings=Settings(), engine=db, queue=queue), queue


def _refusal(services: Services, request: NewRequest) -> SubmitRefused:
    try:
        submit_change(services, request)
    except SubmitRefused as refused:
        return refused
    raise AssertionError("the submission was accepted")


def test_a_new_request_is_recorded_and_driven(db: Engine) -> None:
    """Accepted, not replayed: the operation takes its binding and its drive is queued."""
    services, queue = _services(db)
    accepted = submit_change(services, make_request(idempotency_key="k-1", request_hash="h-1"))
    assert accepted == Accepted(accepted.operation_id, replayed=False)
    assert binding_state(db, accepted.operation_id) is S.APPROVAL_SENDING
    assert queue.enqueued == [
        ("jobs.drive.drive", (accepted.operation_id,), f"drive:{accepted.operation_id}")
    ]


def test_a_replay_returns_the_same_operation(db: Engine) -> None:
    """The same key and hash again: the first operation, replayed, nothing new written."""
    services, queue = _services(db)
    request = make_request(idempotency_key="k-2", request_hash="h-2")
    first = submit_change(services, request)
    audit = count(db, AUDIT)
    again = submit_change(services, request)
    assert again == Accepted(first.operation_id, replayed=True)
    assert count(db, OPERATIONS) == 1
    assert count(db, AUDIT) == audit
    assert queue.drives() == [first.operation_id]


def test_a_reused_key_with_another_request_is_refused_and_changes_nothing(db: Engine) -> None:
    """Another hash under a used key: KEY_REUSED naming the first operation; nothing written."""
    services, queue = _services(db)
    first = submit_change(services, make_request(idempotency_key="k-3", request_hash="h-3"))
    audit = count(db, AUDIT)
    refused = _refusal(services, make_request(idempotency_key="k-3", request_hash="other"))
    assert refused.kind is SubmitRefusal.KEY_REUSED
    assert refused.operation_id == first.operation_id
    assert refused.message == "this Idempotency-Key was used for a different request"
    assert count(db, OPERATIONS) == 1
    assert count(db, AUDIT) == audit
    assert binding_state(db, first.operation_id) is S.APPROVAL_SENDING
    assert queue.drives() == [first.operation_id]


def test_a_second_request_for_a_busy_binding_is_refused_in_progress(db: Engine) -> None:
    """The same subject and target while the first is in flight: IN_PROGRESS naming it."""
    services, _ = _services(db)
    first = submit_change(services, make_request(subject_id="svc-busy"))
    refused = _refusal(services, make_request(subject_id="svc-busy"))
    assert refused.kind is SubmitRefusal.IN_PROGRESS
    assert refused.operation_id == first.operation_id
    assert count(db, OPERATIONS) == 1


def test_an_overloaded_queue_records_the_failure_and_refuses(db: Engine) -> None:
    """At the bound: written as CREATE_FAILED/CREATE_OVERLOADED, refused OVERLOADED, not driven."""
    services, queue = _services(db)
    set_flag(db, "queue.max_length", 2)
    queue.waiting = 2
    refused = _refusal(services, make_request(idempotency_key="k-4", request_hash="h-4"))
    assert refused.kind is SubmitRefusal.OVERLOADED
    assert refused.operation_id is not None
    assert binding_state(db, refused.operation_id) is S.CREATE_FAILED
    assert operation(db, refused.operation_id)["step"] == Step.CREATE_OVERLOADED
    assert queue.enqueued == []


def test_an_overloaded_request_repeated_with_room_is_retried(db: Engine) -> None:
    """Its key again once the queue has room: the recorded operation retried and driven."""
    services, queue = _services(db)
    set_flag(db, "queue.max_length", 1)
    queue.waiting = 1
    request = make_request(idempotency_key="k-5", request_hash="h-5")
    refused = _refusal(services, request)
    still = _refusal(services, request)
    assert still.kind is SubmitRefusal.OVERLOADED
    assert still.operation_id == refused.operation_id
    queue.waiting = 0
    accepted = submit_change(services, request)
    assert accepted == Accepted(str(refused.operation_id), replayed=True)
    assert binding_state(db, accepted.operation_id) is S.APPROVAL_SENDING
    assert queue.drives() == [accepted.operation_id]
    assert count(db, OPERATIONS) == 1
