"""fire() and submit() on the suite's database (SQLite by default, PostgreSQL when given)."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from bot.core.events import Event as E
from bot.core.events import Source
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.errors import Conflict, IllegalTransition, InProgress, NotOwner, UnknownOperation
from bot.store.fire import fire, fire_in, load_current, with_conflict_retry
from bot.store.models import AUDIT, BINDINGS, OPERATIONS, OUTBOX, Binding, Operation
from bot.store.submit import submit
from bot.store.writeguard import StateWriteRefused
from tests.builders import binding_state, count, make_operation, make_request, operation


def fire_count(event: E, outcome: str) -> float:
    """The fire counter for (event, outcome)."""
    value = REGISTRY.get_sample_value(
        "gitops_fire_total", {"event": event.value, "outcome": outcome}
    )
    return value or 0.0


def test_submit_creates_binding_operation_and_first_audit_row(db: Engine) -> None:
    """A new request owns a new binding at version 1, with one audit row and no outbox yet."""
    result = submit(db, make_request(), actor="alice")
    op = operation(db, result.operation_id)
    assert result.new_state is S.APPROVAL_SENDING
    assert op["version"] == 1
    assert op["step"] == Step.APPROVAL_SUBMITTING
    assert count(db, AUDIT, result.operation_id) == 1
    assert count(db, OUTBOX, result.operation_id) == 0  # no MR to show a status on yet


def test_fire_moves_state_step_version_audit_and_outbox_together(db: Engine) -> None:
    """One transition writes binding state, step, version +1, one audit row and its effects."""
    op_id = make_operation(db, S.MR_CREATING)
    before = operation(db, op_id)
    result = fire(
        db,
        TransitionRequest(
            op_id,
            E.MR_OPENED,
            source=Source.JOB,
            actor="bot",
            changes={"mr_iid": 42, "mr_opened_by_bot": True},
        ),
    )
    after = operation(db, op_id)
    assert (result.old_state, result.new_state) == (S.MR_CREATING, S.MR_CREATING)
    assert after["version"] == before["version"] + 1 == result.version
    assert after["step"] == Step.CREATE_SUCCEEDED
    assert after["mr_iid"] == 42
    with db.connect() as conn:
        last = conn.execute(
            select(AUDIT).where(AUDIT.c.operation_id == op_id).order_by(AUDIT.c.id.desc())
        ).first()
        effects = (
            conn.execute(select(OUTBOX.c.effect).where(OUTBOX.c.operation_id == op_id))
            .scalars()
            .all()
        )
    assert last is not None
    assert (last.event, last.to_state, last.version, last.actor) == (
        "mr_opened",
        "MR_CREATING",
        after["version"],
        "bot",
    )
    assert sorted(effects) == ["labels", "status_comment"]


def test_audit_rows_equal_version_increments(db: Engine) -> None:
    """After a whole happy path, the audit log has exactly one row per version."""
    for flow in Flow:
        op_id = make_operation(db, S.VALIDATED, flow=flow)
        assert count(db, AUDIT, op_id) == operation(db, op_id)["version"] == 9


def test_stale_expected_version_is_a_conflict_and_writes_nothing(db: Engine) -> None:
    """A caller holding an old version loses the compare-and-set and changes nothing."""
    op_id = make_operation(db, S.MERGING)
    version = operation(db, op_id)["version"]
    fire(db, TransitionRequest(op_id, E.APPROVALS_GIVEN, expected_version=version))
    conflicts = fire_count(E.RETRY, "conflict")
    with pytest.raises(Conflict):
        fire(db, TransitionRequest(op_id, E.RETRY, expected_version=version))
    assert fire_count(E.RETRY, "conflict") == conflicts + 1
    assert operation(db, op_id)["version"] == version + 1
    assert count(db, AUDIT, op_id) == version + 1


def test_illegal_transition_is_rejected_counted_and_writes_nothing(db: Engine) -> None:
    """An event the table has no row for raises, is counted, and leaves every row as it was."""
    op_id = make_operation(db, S.APPROVAL_SENT)
    before, audit, outbox = operation(db, op_id), count(db, AUDIT), count(db, OUTBOX)
    illegal = fire_count(E.MERGED, "illegal")
    with pytest.raises(IllegalTransition, match="merged is not allowed in APPROVAL_SENT"):
        fire(db, TransitionRequest(op_id, E.MERGED))
    assert fire_count(E.MERGED, "illegal") == illegal + 1
    assert operation(db, op_id) == before
    assert (count(db, AUDIT), count(db, OUTBOX)) == (audit, outbox)
    assert binding_state(db, op_id) is S.APPROVAL_SENT


def test_a_failing_guard_refuses_with_its_reason(db: Engine) -> None:
    """PIPELINE_PASSED before the MR exists is refused by the has_mr guard."""
    op_id = make_operation(db, S.MR_CREATING)
    with pytest.raises(IllegalTransition, match="has_mr: false"):
        fire(db, TransitionRequest(op_id, E.PIPELINE_PASSED))


def test_failure_after_the_state_write_leaves_neither_state_nor_outbox(db: Engine) -> None:
    """The state, audit and outbox writes commit together or not at all."""
    op_id = make_operation(db, S.MR_CREATING, flow=Flow.MR_FIRST)
    before, audit, outbox = operation(db, op_id), count(db, AUDIT), count(db, OUTBOX)

    def crash_after_the_write() -> None:
        with db.begin() as conn:
            fire_in(conn, TransitionRequest(op_id, E.MR_OPENED, changes={"mr_iid": 5}))
            raise RuntimeError("crash after the write, before commit")

    with pytest.raises(RuntimeError):
        crash_after_the_write()
    assert operation(db, op_id) == before
    assert (count(db, AUDIT), count(db, OUTBOX)) == (audit, outbox)


def test_raw_state_writes_outside_fire_are_refused(db: Engine) -> None:
    """ORM, Core and raw SQL writes to a state column are refused; other columns are fine."""
    op_id = make_operation(db, S.MERGING)

    def orm_state_write() -> None:
        with Session(db) as session, session.begin():
            session.scalars(select(Binding)).one().state = S.MERGED

    def orm_version_write() -> None:
        with Session(db) as session, session.begin():
            op = session.get(Operation, op_id)
            assert op is not None
            op.version = 99

    def core_step_write() -> None:
        with db.begin() as conn:
            conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == op_id).values(step=10103))

    def raw_state_write() -> None:
        with db.begin() as conn:
            conn.execute(text("UPDATE bindings SET state = 'MERGED'"))

    for write in (orm_state_write, orm_version_write, core_step_write, raw_state_write):
        with pytest.raises(StateWriteRefused):
            write()
    assert binding_state(db, op_id) is S.MERGING
    with db.begin() as conn:  # remote references and deadlines are not state
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == op_id).values(head_sha="abc"))
    assert operation(db, op_id)["head_sha"] == "abc"


def test_second_request_for_a_busy_subject_is_in_progress(db: Engine) -> None:
    """A request for a subject and target with one in flight is refused with the owner's id."""
    request = make_request()
    first = submit(db, request).operation_id
    with pytest.raises(InProgress) as raised:
        submit(db, make_request(subject_id=request.subject_id, target_key=request.target_key))
    assert raised.value.args[0] == first


def test_reapply_resets_in_place_and_old_events_find_no_owner(db: Engine) -> None:
    """After a rejection a new request takes the same binding; the old operation is stale."""
    old = make_operation(db, S.REJECTED)
    subject = operation(db, old)
    new = submit(
        db, make_request(subject_id=subject["subject_id"], target_key=subject["target_key"])
    ).operation_id
    with db.connect() as conn:
        bindings = conn.execute(select(BINDINGS)).all()
    assert len(bindings) == 1
    assert bindings[0].operation_id == new
    assert bindings[0].state == S.APPROVAL_SENDING
    with pytest.raises(NotOwner):
        fire(db, TransitionRequest(old, E.APPROVED))


def test_revert_spawns_a_new_operation_on_a_validated_change(db: Engine) -> None:
    """A validated change can be reverted by a new operation that owns the binding."""
    original = make_operation(db, S.VALIDATED)
    row = operation(db, original)
    revert = submit(
        db,
        make_request(
            subject_id=row["subject_id"],
            target_key=row["target_key"],
            reverts_operation_id=original,
        ),
    )
    assert revert.event is E.REVERT
    assert revert.new_state is S.APPROVAL_SENDING
    assert operation(db, revert.operation_id)["kind"] == "revert"


def test_revert_is_refused_where_there_is_nothing_to_revert(db: Engine) -> None:
    """A rejected change was never merged, so a revert of it is illegal."""
    original = make_operation(db, S.REJECTED)
    row = operation(db, original)
    with pytest.raises(IllegalTransition):
        submit(
            db,
            make_request(
                subject_id=row["subject_id"],
                target_key=row["target_key"],
                reverts_operation_id=original,
            ),
        )


def test_unknown_operation(db: Engine) -> None:
    """Firing on an id nobody knows is a clear error."""
    with pytest.raises(UnknownOperation):
        fire(db, TransitionRequest("00000000-0000-0000-0000-000000000000", E.RETRY))


def test_conflict_retry_helper_gives_up_after_three(db: Engine) -> None:
    """The helper retries a lost race twice more, then lets the conflict through."""
    op_id = make_operation(db, S.MERGING)
    calls = []

    def attempt() -> object:
        calls.append(1)
        return fire(db, TransitionRequest(op_id, E.RETRY, expected_version=1))

    with pytest.raises(Conflict):
        with_conflict_retry(attempt)
    assert len(calls) == 3
    version = operation(db, op_id)["version"]
    result = with_conflict_retry(
        lambda: fire(db, TransitionRequest(op_id, E.RETRY, expected_version=version))
    )
    assert result.version == version + 1


def test_fields_a_transition_may_not_set(db: Engine) -> None:
    """fire() refuses to set identity or state columns through `changes`."""
    op_id = make_operation(db, S.MERGING)
    with pytest.raises(ValueError, match="cannot set"):
        fire(db, TransitionRequest(op_id, E.RETRY, changes={"flow": "mr_first"}))


def test_fire_with_a_held_operation_skips_the_read_and_stays_safe(db: Engine) -> None:
    """A job may fire holding what it read; a stale copy is a conflict, not a lost update."""
    op_id = make_operation(db, S.MERGING)
    with db.connect() as conn:
        held = load_current(conn, op_id)
    first = fire(db, TransitionRequest(op_id, E.APPROVALS_GIVEN), current=held)
    assert first.current is not None
    second = fire(db, TransitionRequest(op_id, E.REBASE_STARTED), current=first.current)
    assert second.version == held.version + 2
    assert operation(db, op_id)["step"] == Step.HANDLE_REBASING
    with pytest.raises(Conflict):
        fire(db, TransitionRequest(op_id, E.RETRY), current=held)
    assert count(db, AUDIT, op_id) == operation(db, op_id)["version"]


def test_guard_inputs_change_only_through_fire(db: Engine) -> None:
    """Columns the guards read (the MR iid, the approval) cannot be written around fire()."""
    op_id = make_operation(db, S.MR_CREATING)
    with pytest.raises(StateWriteRefused), db.begin() as conn:
        conn.execute(update(OPERATIONS).where(OPERATIONS.c.id == op_id).values(mr_iid=9))
