"""fire() and submit() on the suite's database (SQLite by default, PostgreSQL when given)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

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
from bot.store import fire as fire_module
from bot.store import fire_sql
from bot.store.fire import fire, fire_in, load_current, with_conflict_retry
from bot.store.models import AUDIT, BINDINGS, OPERATIONS, OUTBOX, Binding, Operation
from bot.store.submit import submit
from bot.store.writeguard import StateWriteRefused
from tests.builders import PATHS, binding_state, count, make_operation, make_request, operation


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


# -- the two write paths -------------------------------------------------------------------------


def test_write_path_is_chosen_by_dialect_in_one_place() -> None:
    """PostgreSQL writes through the one-statement CTE; every other database the generic way."""
    assert fire_module.write_path("postgresql") is fire_sql.write_postgres
    assert fire_module.write_path("sqlite") is fire_module._write_generic


T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _rows(db: Engine, op_id: str) -> dict[str, Any]:
    """Everything fire() wrote for one operation, without the ids that differ between runs."""
    with db.connect() as conn:
        op = dict(conn.execute(select(OPERATIONS).where(OPERATIONS.c.id == op_id)).one()._mapping)
        binding = dict(
            conn.execute(
                select(BINDINGS.c.state, BINDINGS.c.version, BINDINGS.c.updated_at).where(
                    BINDINGS.c.operation_id == op_id
                )
            )
            .one()
            ._mapping
        )
        audit = [
            dict(r._mapping)
            for r in conn.execute(
                select(AUDIT).where(AUDIT.c.operation_id == op_id).order_by(AUDIT.c.version)
            )
        ]
        outbox = [
            dict(r._mapping)
            for r in conn.execute(select(OUTBOX).where(OUTBOX.c.operation_id == op_id))
        ]
    for key in ("id", "binding_id", "subject_id"):
        op.pop(key)
    for row in (*audit, *outbox):
        row.pop("id")
        row.pop("operation_id")
    for row in outbox:
        if row["dedupe_key"] is not None:  # a callback's `<operation id>:<phase>`
            row["dedupe_key"] = row["dedupe_key"].replace(op_id, "-")
    outbox.sort(key=lambda r: (r["created_at"], r["effect"]))
    return {"operation": op, "binding": binding, "audit": audit, "outbox": outbox}


def _walk(db: Engine, flow: Flow, subject_id: str) -> list[Any]:
    """Submits a request and fires its flow's whole happy path (with a lost race in the middle),
    with fixed times and JSON, NULL, stamped and plain changes: each result, the rows after it."""
    op_id = submit(
        db,
        make_request(
            flow=flow,
            subject_id=subject_id,
            title="parity",
            callback_url="https://hooks.example.com/parity",
        ),
        now=T0,
    ).operation_id
    results: list[Any] = []
    held = None
    for i, (event, changes) in enumerate(PATHS[flow], start=1):
        now = T0 + timedelta(minutes=i)
        request = TransitionRequest(
            op_id,
            event,
            source=Source.WEBHOOK,
            actor=f"actor-{i}",
            correlation_id=f"cid-{i}",
            changes={
                **changes,
                "progress": {"step": i, "seen": [event.value], "nested": {"ok": True}},
                "deadline_at": now + timedelta(hours=1) if i % 2 else None,
                "error_detail": None,
                "attempts": i,
            },
            detail=f"step {i}: {event.value}",
            now=now,
        )
        result = fire(db, request, current=held)
        assert result.current is not None
        current = replace(result.current, operation_id="-", binding_id=0)
        results.append((result.event, result.old_state, result.new_state, result.step))
        results.append((result.version, current))
        results.append(_rows(db, op_id))
        if i == 3:
            before = _rows(db, op_id)
            with pytest.raises(Conflict):  # the same request on a stale copy writes nothing
                fire(db, request, current=held)
            assert _rows(db, op_id) == before
        held = result.current
    return results


@pytest.mark.pg
@pytest.mark.parametrize("flow", list(Flow))
def test_the_cte_and_the_generic_write_leave_the_same_rows(
    db: Engine, monkeypatch: pytest.MonkeyPatch, flow: Flow
) -> None:
    """The same transitions through the PostgreSQL CTE and through the generic statements give
    the same results and the same operation, binding, audit and outbox rows."""
    assert db.dialect.name == "postgresql"
    used: list[fire_module.WritePath] = []
    chosen = fire_module.write_path

    def through(path: fire_module.WritePath) -> None:
        def spy(dialect: str) -> fire_module.WritePath:
            used.append(path)
            return path

        monkeypatch.setattr(fire_module, "write_path", spy)

    through(chosen(db.dialect.name))
    cte = _walk(db, flow, "parity-cte")
    assert set(used) == {fire_sql.write_postgres}
    used.clear()
    through(fire_module._write_generic)
    generic = _walk(db, flow, "parity-generic")
    assert set(used) == {fire_module._write_generic}
    assert cte == generic
    last = cte[-1]
    assert len(last["audit"]) == last["operation"]["version"] == len(PATHS[flow]) + 1
    assert last["outbox"]  # the comparison covers outbox rows, not two empty lists
    # and the callback rows, one per phase entered
    assert sum(r["effect"] == "callback" for r in last["outbox"]) == len(
        {a["to_state"] for a in last["audit"]}
    )
